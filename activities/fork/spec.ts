/**
 * The shapes an operator writes (fork overrides, eval candidate files), validated by zod: `.strict()`
 * so a misspelt key is an error instead of a silently ignored setting.
 */
import { z } from 'zod';
import { TASK_ID_PATTERN } from '../../workflows/rules/task-input';
import type { ForkInput } from '../../workflows/contract';

/** An identity file is prompt text; a megabyte is far past any prompt's budget. */
const IDENTITY_FILE_MAX_CHARS = 200_000;
/** A replaced tool result goes into the prompt like a recorded one, which is offloaded past 50K. */
const TOOL_RESULT_MAX_CHARS = 50_000;
/** Extra instructions are a paragraph or a page, not a document. */
const INSTRUCTIONS_MAX_CHARS = 20_000;

export const ForkOverridesSchema = z
  .object({
    provider: z.string().min(1).max(100).optional(),
    model: z.string().min(1).max(200).optional(),
    tier: z.enum(['cheap', 'standard', 'premium']).optional(),
    identity: z
      .object({
        soul: z.string().max(IDENTITY_FILE_MAX_CHARS).optional(),
        agents: z.string().max(IDENTITY_FILE_MAX_CHARS).optional(),
        heartbeat: z.string().max(IDENTITY_FILE_MAX_CHARS).optional(),
        tools: z.string().max(IDENTITY_FILE_MAX_CHARS).optional(),
      })
      .strict()
      .optional(),
    toolResult: z
      .object({
        content: z.string().max(TOOL_RESULT_MAX_CHARS),
        isError: z.boolean().optional(),
        callIndex: z.number().int().min(0).optional(),
      })
      .strict()
      .optional(),
    instructions: z.string().min(1).max(INSTRUCTIONS_MAX_CHARS).optional(),
  })
  .strict();

/** Tool names as the registry spells them (letters, digits, `_`, `-`, `.`; MCP tools carry a prefix). */
const TOOL_NAME = z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'a tool name');

export const ForkInputSchema = z
  .object({
    sourceTaskId: z.string().regex(TASK_ID_PATTERN, 'a task id'),
    round: z.number().int().min(1).optional(),
    atStep: z.number().int().min(0),
    overrides: ForkOverridesSchema.optional(),
    allowTools: z.array(TOOL_NAME).max(100).optional(),
  })
  .strict();

/** Validates a fork request; the message names every problem. */
export function parseForkInput(value: unknown): { ok: true; fork: ForkInput } | { ok: false; problem: string } {
  const parsed = ForkInputSchema.safeParse(value);
  if (!parsed.success) return { ok: false, problem: z.prettifyError(parsed.error) };
  return { ok: true, fork: parsed.data as ForkInput };
}

/**
 * One candidate configuration of an eval (a JSON file): a name for the table, and what its forks
 * change. Everything a fork may change except the tool result, which belongs to one task, not to all.
 */
export const EvalCandidateSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/, 'a short name: letters, digits, space . _ -'),
    provider: z.string().min(1).max(100).optional(),
    model: z.string().min(1).max(200).optional(),
    tier: z.enum(['cheap', 'standard', 'premium']).optional(),
    identity: ForkOverridesSchema.shape.identity,
    instructions: z.string().min(1).max(INSTRUCTIONS_MAX_CHARS).optional(),
    allowTools: z.array(TOOL_NAME).max(100).optional(),
  })
  .strict();

export type EvalCandidate = z.infer<typeof EvalCandidateSchema>;

/** A candidate from its file's text; `where` names the file in the error. */
export function parseEvalCandidate(text: string, where: string): EvalCandidate {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${where} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = EvalCandidateSchema.safeParse(value);
  if (!parsed.success)
    throw new Error(`${where} is not a valid candidate configuration:\n${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
