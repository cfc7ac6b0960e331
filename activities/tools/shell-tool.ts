import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { judgeConfig } from '../security/git-config-policy';
import { knownRemoteUrls, recordRemoteUrls } from '../security/remotes';
import { evaluateShellCommand, executeShellCommand, runInvocation, type ShellEvaluation } from './shell';
import { confinePaths } from './shell/confine-paths';
import { readEffectiveGitConfig } from './shell/git-config';
import { MAX_SHELL_TIMEOUT_MS } from './shell/limits';
import { strictest } from './shell/tiers';
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
 *
 * On top of the per-command classifier, two checks need the filesystem and are made both when the
 * call is judged and again right before it runs: every path-like argument must stay inside the
 * workspace (`confine-paths.ts`), and a command that runs git needs the repository's effective
 * configuration to pass the allowlist, remote URLs included (`security/git-config-policy.ts`).
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
    // The workspace changed between judging and running (a link appeared, a remote moved): ask first.
    if (verdict.tier === 'approval' && !ctx.approved) return { content: `Not run: it now needs approval: ${verdict.reason}. Call it again to ask.`, isError: true };
    // A human approved this call: the remote URLs it runs under are approved from now on.
    if (verdict.tier === 'approval' && verdict.unknownRemoteUrls && verdict.unknownRemoteUrls.length > 0) {
      await recordRemoteUrls(ctx.db, await fs.realpath(ctx.workspaceDir), verdict.unknownRemoteUrls, 'approved', ctx.agentId);
    }
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

export type GovernedEvaluation = ShellEvaluation & { unknownRemoteUrls?: string[] };

export interface RepositoryConfigVerdict {
  tier: 'allow' | 'approval' | 'deny';
  reason: string;
  unknownRemoteUrls: string[];
}

export interface ShellGovernanceOptions {
  workspaceDir: string;
  protectedBranches?: readonly string[];
  existingBranches?: readonly string[];
  /** Judges the repository's configuration; called only when the command runs git. */
  judgeRepositoryConfig: () => Promise<RepositoryConfigVerdict>;
}

/**
 * The full governance of one `shell_execute` command: the classifier's tier, then path confinement,
 * then (for git) the repository configuration; the strictest wins.
 */
export async function governShellCommand(command: string | string[], opts: ShellGovernanceOptions): Promise<GovernedEvaluation> {
  const verdict = await evaluateShellCommand(command, { protectedBranches: opts.protectedBranches, existingBranches: opts.existingBranches });
  if (verdict.tier === 'deny' || !verdict.invocations) return verdict;
  let decision = strictest(verdict, await confinePaths(verdict.invocations, opts.workspaceDir));
  let unknownRemoteUrls: string[] | undefined;
  if (decision.tier !== 'deny' && verdict.invocations.some(runsGit)) {
    const config = await opts.judgeRepositoryConfig();
    unknownRemoteUrls = config.unknownRemoteUrls;
    if (config.tier !== 'allow') decision = strictest(decision, { tier: config.tier, reason: config.reason });
  }
  return { ...decision, invocations: verdict.invocations, unknownRemoteUrls };
}

async function evaluate(command: string | string[], ctx: ToolContext): Promise<GovernedEvaluation> {
  return governShellCommand(command, {
    workspaceDir: ctx.workspaceDir,
    protectedBranches: ctx.agentConfig.protectedBranches,
    existingBranches: await listBranches(ctx.workspaceDir, ctx.signal),
    judgeRepositoryConfig: () => judgeRepositoryConfig(ctx),
  });
}

/** Any argument naming git: wrapped git (`env git …`) reads the same configuration. */
function runsGit(argv: readonly string[]): boolean {
  return argv.some((arg) => path.posix.basename(arg) === 'git');
}

/**
 * The repository's effective config against the allowlist. The first time a workspace's repository is
 * seen, its remote URLs are recorded as the ones it was created with (an empty marker when it has
 * none, so a remote added later is never taken as original).
 */
async function judgeRepositoryConfig(ctx: ToolContext): Promise<RepositoryConfigVerdict> {
  const config = await readEffectiveGitConfig(ctx.workspaceDir, ctx.signal);
  if (!config.ok) return { tier: 'deny', reason: `the repository configuration cannot be read (${config.error}); git does not run under configuration it cannot check`, unknownRemoteUrls: [] };
  const inRepository = config.entries.some((entry) => !entry.origin.startsWith('command line'));
  const workspace = await fs.realpath(ctx.workspaceDir);
  let known = await knownRemoteUrls(ctx.db, workspace);
  if (!known.seen && inRepository) {
    const urls = config.entries.filter((e) => /^remote\..+\.(url|pushurl)$/i.test(e.key) && !e.origin.startsWith('command line')).map((e) => e.value);
    await recordRemoteUrls(ctx.db, workspace, [FIRST_SIGHT_MARKER, ...urls], 'first-sight', ctx.agentId);
    known = await knownRemoteUrls(ctx.db, workspace);
  }
  const judged = judgeConfig(config.entries, known.urls);
  return { tier: judged.tier, reason: judged.reason, unknownRemoteUrls: judged.unknownRemoteUrls };
}

/** Recorded for a workspace whose repository had no remotes when first seen. */
const FIRST_SIGHT_MARKER = '';

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
