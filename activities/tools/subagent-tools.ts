import { z } from 'zod';
import { defineTool, type ToolSpec } from './types';
import { SUBAGENT_BRIEF_MAX_CHARS, SUBAGENT_MAX_PARALLEL } from '../../workflows/rules/subagents';

const brief = z
  .object({
    task: z
      .string()
      .trim()
      .min(1, 'a sub-agent needs a task')
      .describe('What the sub-agent must do, self-contained: it sees nothing of your conversation'),
    context: z.string().optional().describe('Facts, file paths or constraints the sub-agent needs'),
  })
  .strict()
  .refine((b) => b.task.length + (b.context?.length ?? 0) <= SUBAGENT_BRIEF_MAX_CHARS, {
    message: `task and context together may have at most ${SUBAGENT_BRIEF_MAX_CHARS} characters; put large material in a file and name its path`,
  });

/**
 * These tools run in the workflow, not in an activity: the LLM step hands them back (like a call that
 * needs approval), the round workflow starts one child workflow per sub-agent and records the
 * aggregated result through the ledger. `run` is never reached there; it answers for any other caller.
 */
const notHere = async () => ({ content: 'Sub-agents can only be spawned while working on a task.', isError: true });

export const spawnSubagent = defineTool({
  name: 'spawn_subagent',
  description:
    'Delegate one self-contained piece of work to a sub-agent: a fresh session of you with file, shell and memory-search tools, ' +
    'which cannot ask questions or spawn further sub-agents. Waits until it finishes and returns its answer (first 500 characters) or its error.',
  schema: brief,
  sideEffecting: true,
  runsInWorkflow: true,
  summarize: (a) => `spawn_subagent ${a.task.slice(0, 80)}`,
  run: notHere,
});

export const spawnSubagents = defineTool({
  name: 'spawn_subagents',
  description:
    `Run up to ${SUBAGENT_MAX_PARALLEL} sub-agents in parallel, one per independent piece of work (same kind of sub-agent as spawn_subagent). ` +
    'Waits until all finish and returns each answer or error, in order.',
  schema: z
    .object({
      subagents: z
        .array(brief)
        .min(1, 'give at least one sub-agent')
        .max(
          SUBAGENT_MAX_PARALLEL,
          `at most ${SUBAGENT_MAX_PARALLEL} sub-agents run in parallel; none was started. Split the work into batches of ${SUBAGENT_MAX_PARALLEL} or fewer`,
        ),
    })
    .strict(),
  sideEffecting: true,
  runsInWorkflow: true,
  summarize: (a) => `spawn_subagents ×${a.subagents.length}`,
  run: notHere,
});

export const subagentTools: ToolSpec[] = [spawnSubagent, spawnSubagents];
