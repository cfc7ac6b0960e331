import { z } from 'zod';
import { agentConfig, identityContentHash, IDENTITY_FILES, type IdentityColumn } from '../store/agents';
import { addTaskEvent } from '../store/tasks';
import { defineTool } from '../tools/types';
import { findSecret } from '../security/secrets';

/**
 * `edit_agent_file`: an agent rewrites one of its own identity files, which are its
 * long-term memory and are never updated automatically. Rules, in order: own files only (SOUL.md,
 * AGENTS.md, HEARTBEAT.md, TOOLS.md), permission flag `canEditOwnFiles`, secret scan, 64 KB cap,
 * one edit per file per run, optional etag = the agent's content hash. The write and its audit row
 * (`agent_file_edits`, diff cut to 5 KB) commit together.
 */

/** An identity file is a prompt segment, not a document store. */
export const AGENT_FILE_MAX_BYTES = 64 * 1024;
/** The audit event's diff is cut to this size. */
export const AGENT_FILE_DIFF_MAX_BYTES = 5 * 1024;
/**
 * Credentials that must never be written into a prompt file (they would be sent to the LLM
 * provider on every call). One list for the whole worker, shared with tool-result redaction.
 */
export { SECRET_PATTERNS, findSecret } from '../security/secrets';

export const EDITABLE_AGENT_FILES = Object.values(IDENTITY_FILES);

/** A Map, not an object: names like `constructor`, `__proto__` or `toString` must not find inherited members. */
const COLUMN_BY_FILE = new Map<string, IdentityColumn>(
  Object.entries(IDENTITY_FILES).map(([column, file]) => [file, column as IdentityColumn]),
);

/**
 * A compact line diff: the changed middle between the common prefix and suffix, as `-`/`+` lines with
 * the first changed line number. Linear time, so a 64 KB file costs nothing; cut to `maxBytes`.
 */
export function lineDiff(before: string, after: string, maxBytes = AGENT_FILE_DIFF_MAX_BYTES): string {
  const a = before.split('\n');
  const b = after.split('\n');
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const lines = [
    `@@ line ${start + 1}: -${endA - start} +${endB - start} @@`,
    ...a.slice(start, endA).map((l) => `-${l}`),
    ...b.slice(start, endB).map((l) => `+${l}`),
  ];
  const diff = lines.join('\n');
  if (Buffer.byteLength(diff) <= maxBytes) return diff;
  const marker = '\n[… diff truncated]';
  return (
    Buffer.from(diff)
      .subarray(0, maxBytes - Buffer.byteLength(marker))
      .toString('utf8')
      .replace(/\uFFFD+$/, '') + marker
  );
}

type Refusal = { content: string; isError: true };
const refuse = (content: string): Refusal => ({ content, isError: true });

export const editAgentFile = defineTool({
  name: 'edit_agent_file',
  description:
    `Rewrite one of your own identity files (${EDITABLE_AGENT_FILES.join(', ')}) with a new full body. These files are your long-term memory: ` +
    `edit them only for lasting changes to who you are or how you work. Needs the canEditOwnFiles permission; one edit per file per run; ` +
    `at most 64 KB; never include credentials. Pass etag (your current content hash) to avoid overwriting a concurrent change.`,
  schema: z
    .object({
      name: z
        .string()
        .min(1)
        .describe(`One of ${EDITABLE_AGENT_FILES.join(', ')}`),
      body: z.string().describe('The complete new content of the file'),
      etag: z
        .string()
        .optional()
        .describe('The content hash you last saw; the edit is refused if the files changed since'),
      agent_id: z.string().optional().describe('Omit: you can only edit your own files'),
    })
    .strict(),
  sideEffecting: true,
  summarize: (a) => `edit_agent_file: ${a.name} (${Buffer.byteLength(a.body)} bytes)`,
  run: async (args, ctx) => {
    // 1. scope: the agent's own four identity files, nothing else.
    if (args.agent_id !== undefined && args.agent_id !== ctx.agentId) {
      return refuse(`Refused: you can only edit your own files, not those of agent ${JSON.stringify(args.agent_id)}.`);
    }
    const column = COLUMN_BY_FILE.get(args.name);
    if (!column)
      return refuse(
        `Refused: ${JSON.stringify(args.name)} is not editable. You can edit only ${EDITABLE_AGENT_FILES.join(', ')}.`,
      );
    // 3. secret scan, 4. size cap: checked before touching the database.
    const secret = findSecret(args.body);
    if (secret)
      return refuse(
        `Refused: the new ${args.name} contains what looks like a credential (${secret}). Never put secrets in identity files.`,
      );
    const bytes = Buffer.byteLength(args.body);
    if (bytes > AGENT_FILE_MAX_BYTES)
      return refuse(
        `Refused: the new ${args.name} is ${bytes} bytes; the limit is ${AGENT_FILE_MAX_BYTES}. Keep identity files concise.`,
      );

    return ctx.db.transaction().execute(async (trx) => {
      const agent = await trx
        .selectFrom('agents')
        .selectAll()
        .where('id', '=', ctx.agentId)
        .forUpdate()
        .executeTakeFirst();
      if (!agent) return refuse(`Refused: agent ${ctx.agentId} does not exist.`);
      // 2. permission.
      if (agentConfig(agent).canEditOwnFiles !== true) {
        return refuse(
          'Refused: you do not have permission to edit your identity files (canEditOwnFiles is off). Ask a human to change them.',
        );
      }
      // 6. etag: optimistic concurrency against the content hash.
      if (args.etag !== undefined && args.etag !== agent.content_hash) {
        return refuse(
          `Refused: the etag does not match; your files changed since you read them (current etag ${agent.content_hash}). Re-read and try again.`,
        );
      }
      // 5. frequency: one edit per file per run (this session), enforced by a unique key.
      const earlier = await trx
        .selectFrom('agent_file_edits')
        .select('id')
        .where('agent_id', '=', ctx.agentId)
        .where('run_id', '=', ctx.sessionId)
        .where('file', '=', args.name)
        .executeTakeFirst();
      if (earlier)
        return refuse(`Refused: you already edited ${args.name} in this run; at most one edit per file per run.`);

      const before = agent[column];
      const files = {
        soul: agent.soul_md,
        agents: agent.agents_md,
        heartbeat: agent.heartbeat_md,
        tools: agent.tools_md,
      };
      const key = ({ soul_md: 'soul', agents_md: 'agents', heartbeat_md: 'heartbeat', tools_md: 'tools' } as const)[
        column
      ];
      files[key] = args.body;
      const afterHash = identityContentHash(files);
      const diff = lineDiff(before, args.body);
      await trx
        .updateTable('agents')
        .set({ [column]: args.body, content_hash: afterHash, updated_at: new Date() })
        .where('id', '=', ctx.agentId)
        .execute();
      await trx
        .insertInto('agent_file_edits')
        .values({
          agent_id: ctx.agentId,
          run_id: ctx.sessionId,
          file: args.name,
          task_id: ctx.taskId ?? null,
          before_hash: agent.content_hash,
          after_hash: afterHash,
          diff,
        })
        .execute();
      if (ctx.taskId) {
        await addTaskEvent(
          trx,
          ctx.taskId,
          'agent-file-edited',
          { file: args.name, runId: ctx.sessionId, diff },
          `agent-file:${ctx.toolCallId}`,
        );
      }
      return { content: `Saved ${args.name} (${bytes} bytes). New etag: ${afterHash}` };
    });
  },
});
