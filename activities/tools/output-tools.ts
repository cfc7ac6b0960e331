import { z } from 'zod';
import { defineTool } from './types';

/** How much of an offloaded output one read returns. */
export const OFFLOADED_READ_MAX_CHARS = 20_000;

export const readToolOutput = defineTool({
  name: 'read_tool_output',
  description:
    'Read part of a large tool output of yours that was stored instead of shown in full. Use the id from the preview.',
  schema: z
    .object({
      id: z.string().min(1),
      offset: z.number().int().min(0).optional(),
      limit: z.number().int().min(1).max(OFFLOADED_READ_MAX_CHARS).optional(),
    })
    .strict(),
  sideEffecting: false,
  summarize: (a) => `read_tool_output ${a.id} @${a.offset ?? 0}`,
  run: async (args, ctx) => {
    // Scoped to the calling agent: another agent's stored output is reported as absent, not refused,
    // so its existence does not leak either.
    const row = await ctx.db
      .selectFrom('tool_outputs')
      .innerJoin('sessions', 'sessions.id', 'tool_outputs.session_id')
      .select(['tool_outputs.content', 'tool_outputs.chars'])
      .where('tool_outputs.id', '=', args.id)
      .where('sessions.agent_id', '=', ctx.agentId)
      .executeTakeFirst();
    if (!row) return { content: `no stored output with id ${args.id} for this agent`, isError: true };
    const offset = args.offset ?? 0;
    const slice = row.content.slice(offset, offset + (args.limit ?? OFFLOADED_READ_MAX_CHARS));
    const end = offset + slice.length;
    return {
      content: `${slice}\n[characters ${offset}–${end} of ${row.chars}${end < row.chars ? `; continue with offset=${end}` : ''}]`,
    };
  },
});
