// A stdio MCP server built on the official SDK that misbehaves on purpose, for the MCP client's bad-input
// tests: a tool list that changes, a tool whose input schema is not valid JSON Schema, a tool that never answers, a tool that
// returns 50 MB and one 3 MB, and (with the argument `malformed`) a stdout that is not JSON-RPC at all.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

if (process.argv[2] === 'malformed') {
  // Answers every line with something that is not a JSON-RPC message.
  process.stdin.on('data', () => process.stdout.write('this is not json-rpc {\n'));
} else {
  const server = new Server({ name: 'hostile', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  // `grow` adds the tool `grown` and says so with notifications/tools/list_changed.
  let grown = false;
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      ...(grown
        ? [
            {
              name: 'grown',
              description: 'Exists once grow ran',
              inputSchema: { type: 'object', properties: {} },
              annotations: { readOnlyHint: true },
            },
          ]
        : []),
      {
        name: 'grow',
        description: 'Adds a tool',
        inputSchema: { type: 'object', properties: {} },
        annotations: { readOnlyHint: true },
      },
      {
        name: 'ok',
        description: 'Answers ok',
        inputSchema: { type: 'object', properties: {} },
        annotations: { readOnlyHint: true },
      },
      {
        name: 'bad-schema',
        description: 'Its schema is not JSON Schema',
        inputSchema: { type: 'object', properties: { x: { type: 'no-such-type' } } },
        annotations: { readOnlyHint: true },
      },
      {
        name: 'hang',
        description: 'Never answers',
        inputSchema: { type: 'object', properties: {} },
        annotations: { readOnlyHint: true },
      },
      {
        name: 'big',
        description: 'Returns 50 MB of text',
        inputSchema: { type: 'object', properties: {} },
        annotations: { readOnlyHint: true },
      },
      {
        name: 'large',
        description: 'Returns 3 MB of text',
        inputSchema: { type: 'object', properties: {} },
        annotations: { readOnlyHint: true },
      },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (request.params.name === 'hang') return new Promise(() => undefined);
    if (request.params.name === 'grow') {
      grown = true;
      await server.sendToolListChanged();
      return { content: [{ type: 'text', text: 'grew' }] };
    }
    if (request.params.name === 'grown') return { content: [{ type: 'text', text: 'grown ok' }] };
    if (request.params.name === 'big') return { content: [{ type: 'text', text: 'x'.repeat(50 * 1024 * 1024) }] };
    if (request.params.name === 'large') return { content: [{ type: 'text', text: 'y'.repeat(3 * 1024 * 1024) }] };
    return { content: [{ type: 'text', text: 'ok' }] };
  });
  await server.connect(new StdioServerTransport());
}
