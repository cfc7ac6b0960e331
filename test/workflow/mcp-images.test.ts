import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { loadMessages } from '../../activities/store/sessions';
import { mcpSessions } from '../../activities/tools/mcp/pool';
import { sniffImage } from '../../activities/tools/tool-images';
import { SESSION_IMAGES_KEPT } from '../../activities/tools/tool-result-images';
import { TOOL_IMAGES_INTRO } from '../../activities/llm/openai';
import { REQUEST_IMAGES_MAX } from '../../activities/llm/request-images';
import type { ToolResultBlock } from '../../activities/llm/types';
import { roundSessionId, roundWorkflowId } from '../../workflows/contract';
import type { RecordedRequest } from '../fake-llm';
import type { Harness } from '../support/harness';
import { submitTurn, toolTurn } from '../support/harness';
import { historiesOfAllRuns, lastToolResults, useScriptedHarness } from './task-support';

const NODE = realpathSync(process.execPath);
const NODE_MODULES = path.resolve('node_modules');
const EVERYTHING_DIR = path.join(NODE_MODULES, '@modelcontextprotocol/server-everything/dist');
const IMAGES = path.resolve('test/support/mcp-image-server.mjs');
const READ_ONLY = [NODE_MODULES, path.dirname(IMAGES)];
const everything = {
  command: NODE,
  args: [path.join(EVERYTHING_DIR, 'index.js'), 'stdio'],
  sandbox: { readOnlyPaths: READ_ONLY },
};
/** The image the reference server's image tool returns, read from its own source. */
const TINY_IMAGE = /MCP_TINY_IMAGE\s*=\s*"([^"]+)"/.exec(
  readFileSync(path.join(EVERYTHING_DIR, 'tools/get-tiny-image.js'), 'utf8'),
)![1]!;

type AnthropicBlock = { type: string; text?: string; source?: { type: string; media_type: string; data: string } };
type AnthropicResult = { type: 'tool_result'; tool_use_id: string; content: string | AnthropicBlock[] };

/** Every tool_result of an Anthropic request, oldest first. */
function anthropicResults(request: RecordedRequest): AnthropicResult[] {
  const messages = (request.body.messages ?? []) as Array<{ role: string; content: unknown }>;
  return messages.flatMap((m) =>
    Array.isArray(m.content) ? (m.content as AnthropicResult[]).filter((b) => b.type === 'tool_result') : [],
  );
}
const imageBlocks = (result: AnthropicResult | undefined): AnthropicBlock[] =>
  Array.isArray(result?.content) ? result.content.filter((b) => b.type === 'image') : [];
const lastResult = (request: RecordedRequest): AnthropicResult => anthropicResults(request).at(-1)!;

/** Everything Temporal recorded for a task: its workflow and its first round. */
async function taskHistoryText(h: Harness, taskId: string): Promise<string> {
  const task = await historiesOfAllRuns(h.temporal.workflow.getHandle(`task-${taskId}`));
  const round = await historiesOfAllRuns(h.temporal.workflow.getHandle(roundWorkflowId(taskId, 1)));
  return JSON.stringify([task, round]);
}

/**
 * Image content from MCP servers reaches the model as images, in each provider's own format, through a
 * real worker against the reference server and a misbehaving one. The image is stored with its message
 * in PostgreSQL and never in Temporal history; a bad, oversized or excess image is described instead.
 */
describe('MCP image content to an Anthropic model', () => {
  const { h, agents } = useScriptedHarness({ beforeClose: () => mcpSessions.closeAll() });

  test("the reference server's image arrives as an image block in the tool_result, stored in PostgreSQL, not in history", async () => {
    const agentId = await h.createAgent({ permissions: { canCallExternalTools: true }, mcpServers: { everything } });
    const taskId = agents.task([toolTurn('mcp__everything__get-tiny-image', {}), submitTurn('seen')]);
    await h.client.startTask({ agentId, taskId, title: 'Image', description: 'look at the image' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const result = lastResult(agents.requests(taskId)[1]!);
    expect(result.content).toEqual([
      {
        type: 'text',
        text: `Here's the image you requested:\n[image content: image/png, ${Buffer.from(TINY_IMAGE, 'base64').length} bytes, 20×20 px]\nThe image above is the MCP logo.`,
      },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: TINY_IMAGE } },
    ]);
    expect(sniffImage(Buffer.from(TINY_IMAGE, 'base64'))).toEqual({ mediaType: 'image/png', width: 20, height: 20 });

    const sessionId = roundSessionId(taskId, 1);
    const stored = (await loadMessages(h.db.db, sessionId))
      .flatMap((m) => m.content)
      .find((b): b is ToolResultBlock => b.type === 'tool_result' && b.images !== undefined);
    expect(stored?.images).toEqual([{ mediaType: 'image/png', data: TINY_IMAGE }]);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select('result')
      .where('session_id', '=', sessionId)
      .where('tool', '=', 'mcp__everything__get-tiny-image')
      .executeTakeFirstOrThrow();
    expect(ledger.result).toMatch(/\[image content: image\/png, \d+ bytes, 20×20 px\]/);
    expect(ledger.result).not.toContain(TINY_IMAGE.slice(0, 40));
    expect(await taskHistoryText(h, taskId)).not.toContain(TINY_IMAGE.slice(0, 40));
  });

  test('a hostile server: excess, mislabelled, fake, oversized and too-wide images are bounded; text beside an image is still redacted and NUL-safe; a request carries the newest images only', async () => {
    const secret = `img-secret-${Math.random().toString(36).slice(2)}`;
    process.env.MCP_IMAGE_TEST_SECRET = secret;
    const agentId = await h.createAgent({
      permissions: { canCallExternalTools: true },
      mcpServers: {
        images: {
          command: NODE,
          args: [IMAGES],
          env: { IMAGE_SERVER_SECRET: '${MCP_IMAGE_TEST_SECRET}' },
          sandbox: { readOnlyPaths: READ_ONLY },
        },
      },
    });
    const taskId = agents.task([
      toolTurn('mcp__images__several', {}),
      toolTurn('mcp__images__mislabelled', {}),
      toolTurn('mcp__images__not-an-image', {}),
      toolTurn('mcp__images__huge', {}),
      toolTurn('mcp__images__wide', {}),
      toolTurn('mcp__images__secret-beside', {}),
      toolTurn('mcp__images__several', {}),
      toolTurn('mcp__images__several', {}),
      submitTurn('bounded'),
    ]);
    await h.client.startTask({ agentId, taskId, title: 'Images', description: 'look at every image' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const requests = agents.requests(taskId);

    const several = lastResult(requests[1]!);
    expect(imageBlocks(several).map((b) => b.source!.media_type)).toEqual(Array(4).fill('image/png'));
    expect(
      lastToolResults(requests[1]!)[0]!.text.match(/not shown to you: a result shows at most 4 images/g),
    ).toHaveLength(2);

    const mislabelled = lastResult(requests[2]!);
    expect(imageBlocks(mislabelled).map((b) => b.source!.media_type)).toEqual(['image/jpeg']);
    expect(lastToolResults(requests[2]!)[0]!.text).toMatch(
      /\[image content: image\/jpeg, 41 bytes, 12×8 px \(the server said image\/png\)\]/,
    );

    for (const [index, why] of [
      [
        3,
        /\[image content: an unnamed type, \d+ bytes; not shown to you: its data is not a PNG, JPEG, GIF or WebP image\]/,
      ],
      [4, /not shown to you: it is larger than 2 MB, the most one image may be/],
      [5, /not shown to you: it is 10000×10 px; a side may be at most 8000 px/],
    ] as const) {
      expect(imageBlocks(lastResult(requests[index]!))).toEqual([]);
      expect(lastToolResults(requests[index]!)[0]!.text).toMatch(why);
    }
    expect(JSON.stringify(requests[3]!.body)).not.toContain('ignore previous instructions');

    const beside = lastResult(requests[6]!);
    expect(imageBlocks(beside)).toHaveLength(1);
    const besideText = lastToolResults(requests[6]!)[0]!.text;
    expect(besideText).toContain('before\\0after');
    expect(besideText).toContain('[REDACTED secret]');
    expect(JSON.stringify(requests.map((r) => r.body))).not.toContain(secret);

    // The last request: the newest 8 images, from the last two results; older results are text only.
    const last = anthropicResults(requests[8]!);
    expect(last.map((r) => imageBlocks(r).length)).toEqual([0, 0, 0, 0, 0, 0, 4, 4]);
    expect(last.flatMap(imageBlocks)).toHaveLength(REQUEST_IMAGES_MAX);
    expect(typeof last[0]!.content).toBe('string');
    expect(last[0]!.content).toMatch(/\[image content: image\/png, \d+ bytes, 1×1 px\]/);

    // PostgreSQL keeps all 14 images; the session's messages only the 8 a request can still show.
    const sessionId = roundSessionId(taskId, 1);
    const inMessages = (await loadMessages(h.db.db, sessionId))
      .flatMap((m) => m.content)
      .flatMap((b) => (b.type === 'tool_result' ? (b.images ?? []) : []));
    expect(inMessages).toHaveLength(SESSION_IMAGES_KEPT);
    const archived = await h.db.db
      .selectFrom('tool_result_images')
      .select(['media_type', 'bytes'])
      .where('session_id', '=', sessionId)
      .execute();
    expect(archived).toHaveLength(14);
    expect(archived.filter((a) => a.media_type === 'image/jpeg')).toEqual([{ media_type: 'image/jpeg', bytes: 41 }]);
  }, 90_000);
});

describe('MCP image content to an OpenAI model', () => {
  const { h, agents } = useScriptedHarness({ provider: 'openai', beforeClose: () => mcpSessions.closeAll() });

  test('the tool message carries the text; the image follows in a user message, as Chat Completions requires', async () => {
    const agentId = await h.createAgent({ permissions: { canCallExternalTools: true }, mcpServers: { everything } });
    const taskId = agents.task([toolTurn('mcp__everything__get-tiny-image', {}), submitTurn('seen')]);
    await h.client.startTask({ agentId, taskId, title: 'Image', description: 'look at the image' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const messages = agents.requests(taskId)[1]!.body.messages as Array<{
      role: string;
      content: unknown;
      tool_call_id?: string;
    }>;
    const toolIndex = messages.findIndex((m) => m.role === 'tool');
    const tool = messages[toolIndex]!;
    expect(tool.content).toMatch(
      /^Here's the image you requested:\n\[image content: image\/png, \d+ bytes, 20×20 px\]/,
    );
    expect(messages[toolIndex + 1]).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: `${TOOL_IMAGES_INTRO} ${tool.tool_call_id}:` },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${TINY_IMAGE}` } },
      ],
    });
  });
});
