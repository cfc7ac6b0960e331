"""An OTLP/HTTP receiver for tests, decoding with the OpenTelemetry project's own protocol definitions
(the `opentelemetry-proto` package). Prints the port it listens on, then one JSON line per request:
its path and content type, every span with its ids, name and attributes (each attribute tagged with
the protobuf `AnyValue` field that carried it, so a test can see a nested map), and the names of the
metrics it carried."""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest, ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse


def any_value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return {"type": kind, "value": [any_value(x) for x in v.array_value.values]}
    if kind == "kvlist_value":
        return {"type": kind, "value": {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}}
    if kind == "bytes_value":
        return {"type": kind, "value": v.bytes_value.hex()}
    return {"type": kind, "value": getattr(v, kind) if kind else None}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def read_body(self):
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("content-length", "0")))
        body = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                self.rfile.readline()
                return body
            body += self.rfile.read(size)
            self.rfile.readline()

    def do_POST(self):
        body = self.read_body()
        content_type = self.headers.get("content-type", "")
        record = {"path": self.path, "contentType": content_type, "spans": [], "metrics": []}
        if self.path == "/v1/metrics" and content_type.startswith("application/x-protobuf"):
            request = ExportMetricsServiceRequest.FromString(body)
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    record["metrics"] += [m.name for m in scope_metrics.metrics]
            print(json.dumps(record), flush=True)
            return self.reply(ExportMetricsServiceResponse().SerializeToString())
        if content_type.startswith("application/x-protobuf"):
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                service = next((any_value(a.value)["value"] for a in resource_spans.resource.attributes if a.key == "service.name"), None)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        record["spans"].append({
                            "service": service,
                            "traceId": span.trace_id.hex(),
                            "spanId": span.span_id.hex(),
                            "parentSpanId": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "attributes": {a.key: any_value(a.value) for a in span.attributes},
                        })
        print(json.dumps(record), flush=True)
        self.reply(ExportTraceServiceResponse().SerializeToString())

    def reply(self, reply):
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
