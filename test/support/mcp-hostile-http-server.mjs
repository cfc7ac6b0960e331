// A Streamable HTTP MCP server built on the official SDK whose `big` tool answers with 20 MB, for the
// MCP client's size limit over HTTP. Stateless (a server per request, as the SDK documents), listening on
// the port given as the first argument; `json` as the second answers with JSON bodies instead of SSE.
import { createServer } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [port, mode] = process.argv.slice(2);

function mcpServer() {
  const server = new Server({ name: 'hostile-http', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: ['big', 'ok'].map((name) => ({
      name,
      description: name === 'big' ? 'Answers with 20 MB of text' : 'Answers ok',
      inputSchema: { type: 'object', properties: {} },
      annotations: { readOnlyHint: true },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => ({
    content: [{ type: 'text', text: request.params.name === 'big' ? 'z'.repeat(20 * 1024 * 1024) : 'ok' }],
  }));
  return server;
}

createServer(async (req, res) => {
  const server = mcpServer();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: mode === 'json',
  });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
}).listen(Number(port), '127.0.0.1', () => console.error(`listening on port ${port}`));
