import { existsSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { evaluateShellCommand, executeShellCommand, runInvocation, type ShellEvaluation } from './shell';
import { MAX_SHELL_TIMEOUT_MS } from './shell/limits';
import { defineTool, type GovernanceDecision, type ToolContext } from './types';

/** Longest command string accepted from the model. */
export const SHELL_COMMAND_MAX_CHARS = 8_000;
/** Listing branches for the classifier must be quick; it runs before every shell call in a repository. */
const BRANCH_LIST_TIMEOUT_MS = 5_000;

const shellSchema = z
  .object({
    command: z
      .union([z.string().min(1).max(SHELL_COMMAND_MAX_CHARS), z.array(z.string()).min(1).max(200)])
      .describe('A single command (or commands joined by &&) without pipes, redirections or expansions; or an argv array'),
    timeout_seconds: z.number().int().min(1).max(MAX_SHELL_TIMEOUT_MS / 1000).optional(),
  })
  .strict();

/**
 * `shell_execute` with seed D1's three-tier governance: safe commands run; risky ones (checkout of an
 * existing branch, merge, rebase, push to a protected branch, anything not provably safe) wait for a
 * human; destructive ones (force push) and anything that is not a clean invocation are refused.
 * Commands never go through a shell interpreter, and git runs hardened against repository config.
 */
export const shellExecute = defineTool({
  name: 'shell_execute',
  description:
    'Run a command in your workspace, without a shell: no pipes, redirections, globs or $(…). Read-only commands and ordinary git work run at once; risky commands wait for a human approval; destructive ones (force push) are refused.',
  schema: shellSchema,
  sideEffecting: true,
  summarize: (a) => `shell_execute: ${commandText(a.command)}`.slice(0, 120),
  govern: async (a, ctx) => toGovernance(await evaluate(a.command, ctx)),
  run: async (a, ctx) => {
    const verdict = await evaluate(a.command, ctx);
    // Re-checked at run time: a denial can never be bypassed, whatever happened before.
    if (verdict.tier === 'deny' || !verdict.invocations) return { content: `Refused: ${verdict.reason}`, isError: true };
    const execution = await executeShellCommand(verdict.invocations, {
      cwd: ctx.workspaceDir,
      signal: ctx.signal,
      timeoutMs: a.timeout_seconds ? a.timeout_seconds * 1000 : undefined,
    });
    const parts = execution.steps.map(({ argv, result }) => {
      const status = result.cancelled ? 'cancelled' : result.timedOut ? 'timed out' : `exit code ${result.exitCode ?? result.signal}`;
      return [`$ ${argv.join(' ')}`, `[${status}, ${result.durationMs} ms${result.truncated ? ', output truncated' : ''}]`, result.stdout, result.stderr && `[stderr]\n${result.stderr}`]
        .filter(Boolean)
        .join('\n');
    });
    return { content: parts.join('\n\n') || '(no output)', isError: !execution.succeeded };
  },
});

function commandText(command: string | string[]): string {
  return Array.isArray(command) ? command.join(' ') : command;
}

async function evaluate(command: string | string[], ctx: ToolContext): Promise<ShellEvaluation> {
  return evaluateShellCommand(command, {
    protectedBranches: ctx.agentConfig.protectedBranches,
    existingBranches: await listBranches(ctx.workspaceDir, ctx.signal),
  });
}

function toGovernance(verdict: ShellEvaluation): GovernanceDecision {
  if (verdict.tier === 'allow') return { tier: 'allow' };
  return { tier: verdict.tier, reason: verdict.reason };
}

/** Local branch names, for "checkout of an existing branch needs approval"; empty outside a repository. */
async function listBranches(workspaceDir: string, signal: AbortSignal): Promise<string[]> {
  if (!existsSync(path.join(workspaceDir, '.git'))) return [];
  const result = await runInvocation(['git', 'branch', '--list', '--format=%(refname:short)'], { cwd: workspaceDir, signal, timeoutMs: BRANCH_LIST_TIMEOUT_MS });
  return result.exitCode === 0 ? result.stdout.split('\n').map((l) => l.trim()).filter(Boolean) : [];
}
