/**
 * An MCP server's tool as one of the runtime's tools: a namespaced name, the server's JSON Schema
 * (checked to be one before it is offered), a tier from its annotations and the operator's overrides,
 * and a run that goes through the worker's session pool with the activity's signal, a timeout and
 * progress heartbeats. What a server returns is mapped to text the model reads.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { trace } from '@opentelemetry/api';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { ToolResultImage } from '../../llm/types';
import { addTaskEvent } from '../../store/tasks';
import { checkToolImage, declaredTypeLabel } from '../tool-images';
import type { GovernanceDecision, ToolSpec } from '../types';
import { MCP_DEFAULT_CALL_TIMEOUT_MS, type McpServerConfig } from './config';
import { recordMcpCall } from './metrics';
import { errorText, mcpSessions } from './pool';

/** Tool names the providers accept: OpenAI's limit is 64 characters of `[a-zA-Z0-9_-]`. */
const PROVIDER_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** The prefix of every MCP tool's name; `__` separates server and tool. */
export const MCP_TOOL_PREFIX = 'mcp__';
/** A description is prompt text on every step: a paragraph, not a manual. */
const MCP_DESCRIPTION_MAX_CHARS = 2_000;
/** A definition's schema is prompt text on every step too. */
const MCP_SCHEMA_MAX_CHARS = 20_000;
/** What one result may bring into the ledger; beyond it the result is cut (the offload keeps what is left). */
export const MCP_RESULT_MAX_CHARS = 2_000_000;
/** Progress events written to the task's timeline at most this often per call. */
const PROGRESS_EVENT_INTERVAL_MS = 1_000;

/** One tool as a step offered it: recorded in the step's snapshot, so retries offer exactly this. */
export interface McpToolEntry {
  server: string;
  /** The server's own name for the tool. */
  tool: string;
  /** The namespaced name the model sees. */
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations: { readOnlyHint?: boolean; idempotentHint?: boolean; destructiveHint?: boolean; openWorldHint?: boolean };
}

export interface McpRefusal {
  server: string;
  tool?: string;
  reason: string;
}

export function mcpToolName(server: string, tool: string): string {
  return `${MCP_TOOL_PREFIX}${server}__${tool}`;
}

// Not strict: servers' schemas carry keywords of their own (titles, examples); formats are checked.
const ajv = addFormats(new Ajv({ strict: false, allErrors: false, validateSchema: true }));

/** The server's listing as entries to offer and tools refused with their reason. */
export function entriesFromListing(
  server: string,
  tools: readonly Tool[],
): { entries: McpToolEntry[]; refused: McpRefusal[] } {
  const entries: McpToolEntry[] = [];
  const refused: McpRefusal[] = [];
  const seen = new Set<string>();
  for (const tool of tools) {
    const name = mcpToolName(server, tool.name);
    const problem = definitionProblem(name, tool, seen);
    if (problem) {
      refused.push({ server, tool: String(tool.name).slice(0, 200), reason: problem });
      continue;
    }
    seen.add(name);
    const a = tool.annotations ?? {};
    entries.push({
      server,
      tool: tool.name,
      name,
      description: (tool.description ?? tool.title ?? tool.name).slice(0, MCP_DESCRIPTION_MAX_CHARS),
      inputSchema: tool.inputSchema as Record<string, unknown>,
      annotations: pickBooleans(a, ['readOnlyHint', 'idempotentHint', 'destructiveHint', 'openWorldHint']),
    });
  }
  return { entries, refused };
}

function definitionProblem(name: string, tool: Tool, seen: ReadonlySet<string>): string | undefined {
  if (!PROVIDER_TOOL_NAME.test(name))
    return `its name ${JSON.stringify(name)} is not 1-64 characters of letters, digits, "_" and "-", which the model providers require`;
  if (seen.has(name)) return `the server lists "${tool.name}" twice`;
  const schema = tool.inputSchema as unknown;
  if (!schema || typeof schema !== 'object' || (schema as { type?: unknown }).type !== 'object')
    return 'its input schema is not a JSON Schema object with "type": "object"';
  if (JSON.stringify(schema).length > MCP_SCHEMA_MAX_CHARS)
    return `its input schema is over ${MCP_SCHEMA_MAX_CHARS} characters`;
  try {
    ajv.compile(schema as object);
  } catch (error) {
    return `its input schema is not valid JSON Schema (${errorText(error).slice(0, 300)})`;
  }
  return undefined;
}

function pickBooleans<K extends string>(
  from: Record<string, unknown>,
  keys: readonly K[],
): Partial<Record<K, boolean>> {
  return Object.fromEntries(keys.flatMap((k) => (typeof from[k] === 'boolean' ? [[k, from[k]]] : []))) as Partial<
    Record<K, boolean>
  >;
}

/** Where a call finds its server now: the configuration by name (resolved at call time, never recorded). */
export type ServerLookup = (server: string) => McpServerConfig | undefined;

/** The default tier: read-only tools run without a human; anything else (the spec presumes destructive) asks. */
export function mcpTier(entry: McpToolEntry, config: McpServerConfig | undefined): GovernanceDecision {
  const tier =
    config?.tools?.[entry.tool]?.tier ??
    config?.tier ??
    (entry.annotations.readOnlyHint === true ? 'allow' : 'approval');
  if (tier === 'allow') return { tier: 'allow' };
  if (tier === 'deny')
    return { tier: 'deny', reason: `the operator does not allow ${entry.server}'s tool "${entry.tool}"` };
  const why =
    config?.tools?.[entry.tool]?.tier || config?.tier
      ? 'the operator requires approval for it'
      : 'the server does not mark it read-only';
  return { tier: 'approval', reason: `MCP tool "${entry.tool}" of server "${entry.server}": ${why}` };
}

/** Whether a call cut off mid-run may run again: the operator's word, else the server's `idempotentHint`. */
export function mcpIdempotent(entry: McpToolEntry, config: McpServerConfig | undefined): boolean {
  return config?.tools?.[entry.tool]?.idempotent ?? entry.annotations.idempotentHint === true;
}

export function mcpToolSpec(entry: McpToolEntry, lookup: ServerLookup): ToolSpec {
  const validate: ValidateFunction = ajv.compile(entry.inputSchema);
  const config = lookup(entry.server);
  const schema = z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
    if (!validate(value))
      ctx.addIssue({ code: 'custom', message: ajv.errorsText(validate.errors, { dataVar: 'arguments' }) });
  });
  return {
    name: entry.name,
    description: entry.description,
    schema,
    inputJsonSchema: entry.inputSchema,
    sideEffecting: !mcpIdempotent(entry, config),
    runsPrograms: true,
    govern: () => mcpTier(entry, config),
    summarize: (args) => `mcp ${entry.server} · ${entry.tool} ${JSON.stringify(args)}`.slice(0, 120),
    run: async (args, ctx) => {
      const current = lookup(entry.server);
      if (!current)
        return {
          content: `MCP server "${entry.server}" is no longer configured for this agent; ${entry.name} cannot run.`,
          isError: true,
        };
      trace
        .getActiveSpan()
        ?.setAttributes({ 'durable_agents.mcp.server': entry.server, 'durable_agents.mcp.tool': entry.tool });
      const session = mcpSessions.session(entry.server, current, ctx.workspaceDir);
      const timeoutMs = current.timeoutMs ?? MCP_DEFAULT_CALL_TIMEOUT_MS;
      let lastEvent = 0;
      try {
        const result = await session.callTool(entry.tool, args as Record<string, unknown>, {
          signal: ctx.signal,
          timeoutMs,
          onProgress: (progress) => {
            ctx.heartbeat();
            const now = Date.now();
            if (!ctx.taskId || now - lastEvent < PROGRESS_EVENT_INTERVAL_MS) return;
            lastEvent = now;
            const data = {
              tool: entry.name,
              progress: progress.progress,
              ...(progress.total !== undefined ? { total: progress.total } : {}),
              ...(progress.message ? { message: String(progress.message).slice(0, 200) } : {}),
            };
            void addTaskEvent(
              ctx.db,
              ctx.taskId,
              'tool-progress',
              data,
              `mcp-progress:${ctx.toolCallId}:${progress.progress}`,
            ).catch(() => undefined);
          },
        });
        recordMcpCall(entry.server, result.isError ? 'tool_error' : 'ok');
        const { text, images } = resultContent(result);
        return { content: text, isError: result.isError === true, ...(images.length > 0 ? { images } : {}) };
      } catch (error) {
        if (ctx.signal.aborted) {
          recordMcpCall(entry.server, 'cancelled');
          throw error;
        }
        const timedOut = /timed out|timeout/i.test(errorText(error));
        recordMcpCall(entry.server, timedOut ? 'timeout' : 'failed');
        const text = timedOut
          ? `MCP tool ${entry.tool} of server "${entry.server}" did not answer within ${timeoutMs} ms and was cancelled.`
          : `MCP tool ${entry.tool} of server "${entry.server}" failed: ${errorText(error)}`;
        return { content: text, isError: true };
      }
    },
  };
}

/**
 * A result's content blocks as text and images: text as is; images checked (`checkToolImage`), kept to
 * be shown to the model and described in the text; audio and other blocks described; structured content
 * as JSON when no text carries it.
 */
export function resultContent(result: CallToolResult): { text: string; images: ToolResultImage[] } {
  const parts: string[] = [];
  const images: ToolResultImage[] = [];
  for (const block of result.content ?? []) {
    switch (block.type) {
      case 'text':
        parts.push(block.text);
        break;
      case 'image': {
        const checked = checkToolImage(block.mimeType, block.data, images.length);
        if (checked.kept) images.push(checked.image);
        parts.push(checked.description);
        break;
      }
      case 'audio':
        // Kept out of the text: a base64 body is not something a model can read as text.
        parts.push(
          `[audio content: ${declaredTypeLabel(block.mimeType)}, ${Math.floor((String(block.data).length * 3) / 4)} bytes]`,
        );
        break;
      case 'resource_link':
        parts.push(
          `[resource link: ${block.name} ${block.uri}${block.mimeType ? ` (${block.mimeType})` : ''}${block.description ? ` - ${block.description}` : ''}]`,
        );
        break;
      case 'resource': {
        const resource = block.resource as { uri: string; mimeType?: string; text?: string; blob?: string };
        parts.push(
          resource.text !== undefined
            ? `[resource ${resource.uri}]\n${resource.text}`
            : `[resource ${resource.uri}: ${resource.mimeType ?? 'binary'}, ${Math.floor(((resource.blob ?? '').length * 3) / 4)} bytes]`,
        );
        break;
      }
      default:
        parts.push(`[${String((block as { type?: unknown }).type)} content]`);
    }
  }
  // The spec asks servers to repeat structured content as text; only when none came is it added.
  const hasText = (result.content ?? []).some((block) => block.type === 'text');
  if (result.structuredContent !== undefined && !hasText)
    parts.push(`Structured content: ${JSON.stringify(result.structuredContent)}`);
  const text = parts.join('\n');
  if (text.length <= MCP_RESULT_MAX_CHARS) return { text, images };
  return {
    text: `${text.slice(0, MCP_RESULT_MAX_CHARS)}\n[MCP result cut at ${MCP_RESULT_MAX_CHARS} of ${text.length} characters.]`,
    images,
  };
}
