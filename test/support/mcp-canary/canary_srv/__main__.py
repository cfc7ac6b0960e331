# The real `canary_srv`: a minimal MCP stdio server (newline-delimited JSON-RPC) with one read-only
# tool, `whoami`, that says it is the real server and whether its configured secret reached it.
# test/workflow/mcp-planted-module.test.ts starts it as `python3 -m canary_srv` with this folder's
# parent on PYTHONPATH.
import json
import os
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


WHOAMI = {
    "name": "whoami",
    "description": "Says which server answered.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}

for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    method, request_id = request.get("method"), request["id"]
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "canary_srv", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": [WHOAMI]}
    elif method == "tools/call":
        has_secret = "yes" if os.environ.get("CANARY_SECRET") else "no"
        result = {"content": [{"type": "text", "text": f"the real canary server; it has its secret: {has_secret}"}]}
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})
        continue
    send({"jsonrpc": "2.0", "id": request_id, "result": result})
