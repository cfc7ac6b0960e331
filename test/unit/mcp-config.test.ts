import { AgentConfigSchema } from '../../activities/store/agents';
import { secretValues } from '../../activities/security/secrets';
import { safeToolText } from '../../activities/security/tool-text';
import { MissingSecretError, McpServersSchema, parseMcpJson, resolveSecrets } from '../../activities/tools/mcp/config';
import { entriesFromListing, mcpIdempotent, mcpTier, resultContent } from '../../activities/tools/mcp/tool-spec';
import { registerSecretValues } from '../../activities/security/secrets';

describe('MCP server configuration', () => {
  test('the mcpServers shape of desktop clients is accepted; a typo, a bad name or a non-http url is refused', () => {
    const servers = {
      github: {
        command: 'npx',
        args: ['-y', '@modelcontextprotocol/server-github'],
        env: { GITHUB_PERSONAL_ACCESS_TOKEN: '${GITHUB_TOKEN}' },
      },
      search: { url: 'https://search.example/mcp', headers: { Authorization: 'Bearer ${SEARCH_TOKEN}' } },
    };
    expect(
      AgentConfigSchema.parse({ permissions: { canCallExternalTools: true }, mcpServers: servers }).mcpServers,
    ).toEqual(servers);
    expect(McpServersSchema.safeParse({ github: { command: 'npx', arg: [] } }).success).toBe(false);
    expect(McpServersSchema.safeParse({ Bad__Name: { command: 'npx' } }).success).toBe(false);
    expect(McpServersSchema.safeParse({ files: { url: 'file:///etc/passwd' } }).success).toBe(false);
    expect(parseMcpJson('{"mcpServers": {"x": {"command": "npx"}}}')).toEqual({ servers: { x: { command: 'npx' } } });
    expect(parseMcpJson('not json')).toEqual({ problems: [expect.stringMatching(/^mcp\.json is not JSON/)] });
  });

  test('${NAME} references come from the worker environment only; a missing one is a clear error; resolved values are redacted', () => {
    const env = { SEARCH_TOKEN: 'tok-abcdef-123456', PLAIN: 'plain-value-987654' };
    const { config, secrets } = resolveSecrets(
      {
        url: 'https://search.example/mcp',
        headers: { Authorization: 'Bearer ${SEARCH_TOKEN}', 'X-Other': '${PLAIN}' },
      },
      env,
    );
    expect(config).toEqual({
      url: 'https://search.example/mcp',
      headers: { Authorization: 'Bearer tok-abcdef-123456', 'X-Other': 'plain-value-987654' },
    });
    expect(() => resolveSecrets({ command: 'x', env: { T: '${NOT_SET_ANYWHERE}' } }, env)).toThrow(MissingSecretError);
    // A value whose variable name says nothing secret is redacted once an MCP configuration resolved it.
    expect(secretValues()).not.toContain('plain-value-987654');
    registerSecretValues(secrets);
    expect(secretValues()).toContain('plain-value-987654');
    expect(safeToolText('the header was plain-value-987654').text).not.toContain('plain-value-987654');
  });
});

describe('MCP tool definitions', () => {
  const tool = (name: string, inputSchema: unknown, annotations: Record<string, boolean> = {}) =>
    ({ name, inputSchema, annotations }) as never;

  test('tools are namespaced per server; invalid JSON Schema and unusable names are refused with a reason, the rest kept in order', () => {
    const { entries, refused } = entriesFromListing('files', [
      tool('read', { type: 'object', properties: { path: { type: 'string' } } }),
      tool('bad', { type: 'object', properties: { x: { type: 'no-such-type' } } }),
      tool('not-object', { type: 'string' }),
      tool('has space', { type: 'object' }),
      tool('write', { type: 'object' }),
    ]);
    expect(entries.map((e) => e.name)).toEqual(['mcp__files__read', 'mcp__files__write']);
    expect(refused.map((r) => [r.tool, r.reason.split(' ').slice(0, 4).join(' ')])).toEqual([
      ['bad', 'its input schema is'],
      ['not-object', 'its input schema is'],
      ['has space', 'its name "mcp__files__has space"'],
    ]);
    expect(refused[0]!.reason).toMatch(/not valid JSON Schema/);
  });

  test('tiers: readOnlyHint runs without a human, anything else asks, the operator overrides per server and per tool; idempotence likewise', () => {
    const [readOnly, plain] = entriesFromListing('s', [
      tool('r', { type: 'object' }, { readOnlyHint: true, idempotentHint: true }),
      tool('w', { type: 'object' }),
    ]).entries;
    expect(mcpTier(readOnly!, { command: 'x' })).toEqual({ tier: 'allow' });
    expect(mcpTier(plain!, { command: 'x' }).tier).toBe('approval');
    expect(mcpTier(plain!, { command: 'x', tier: 'allow' }).tier).toBe('allow');
    expect(mcpTier(readOnly!, { command: 'x', tools: { r: { tier: 'deny' } } }).tier).toBe('deny');
    expect(mcpIdempotent(readOnly!, { command: 'x' })).toBe(true);
    expect(mcpIdempotent(readOnly!, { command: 'x', tools: { r: { idempotent: false } } })).toBe(false);
    expect(mcpIdempotent(plain!, { command: 'x' })).toBe(false);
  });

  test('content blocks become text: an image that is not one is described, resource links named, structured content only when no text carries it', () => {
    expect(
      resultContent({
        content: [
          { type: 'text', text: 'hello' },
          { type: 'image', data: 'AAAA', mimeType: 'image/png' },
          { type: 'resource_link', name: 'readme', uri: 'file:///ws/README.md', mimeType: 'text/markdown' },
          { type: 'resource', resource: { uri: 'mem://note', text: 'a note' } },
        ],
      }),
    ).toEqual({
      text: 'hello\n[image content: image/png, 3 bytes; not shown to you: its data is not a PNG, JPEG, GIF or WebP image]\n[resource link: readme file:///ws/README.md (text/markdown)]\n[resource mem://note]\na note',
      images: [],
    });
    expect(resultContent({ content: [], structuredContent: { a: 1 } }).text).toBe('Structured content: {"a":1}');
  });
});
