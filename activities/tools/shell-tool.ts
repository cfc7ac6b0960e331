import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { judgeConfig } from '../security/git-config-policy';
import { findAgent } from '../store/agents';
import { agentGitIdentity, applyGitIdentity, type GitIdentity } from '../store/workspace-dir';
import { knownRemoteUrls, recordRemoteUrls } from '../security/remotes';
import {
  evaluateShellCommand,
  executeShellCommand,
  runInvocation,
  type RunResult,
  type ShellEvaluation,
} from './shell';
import { confinePaths } from './shell/confine-paths';
import { splitGitArgv } from './shell/git-argv';
import { readEffectiveGitConfig } from './shell/git-config';
import { MAX_SHELL_TIMEOUT_MS } from './shell/limits';
import { judgePushByGit, type GitRunner } from './shell/push-effects';
import { sandboxStatus, type RemoteAccess } from './shell/sandbox';
import { approval, strictest, type ShellDecision } from './shell/tiers';
import { defineTool, type GovernanceDecision, type ToolContext } from './types';
import { effectBegins, startsItsOwnEffect } from './effect-starts';

/** Longest command string accepted from the model. */
export const SHELL_COMMAND_MAX_CHARS = 8_000;
/** Listing refs for the classifier must be quick; it runs before every shell call in a repository. */
const BRANCH_LIST_TIMEOUT_MS = 5_000;
/** `git push --dry-run` and `git ls-remote --symref` before a push: they contact the remote, so a little longer. */
const PUSH_PROBE_TIMEOUT_MS = 30_000;
/** Git subcommands that contact the remote named by their first positional argument. */
const REMOTE_NAMING_SUBCOMMANDS = new Set(['fetch', 'pull', 'push', 'ls-remote']);

const shellSchema = z
  .object({
    command: z
      .union([z.string().min(1).max(SHELL_COMMAND_MAX_CHARS), z.array(z.string()).min(1).max(200)])
      .describe(
        'A single command (or commands joined by &&) without pipes, redirections or expansions; or an argv array',
      ),
    timeout_seconds: z
      .number()
      .int()
      .min(1)
      .max(MAX_SHELL_TIMEOUT_MS / 1000)
      .optional(),
  })
  .strict();

/**
 * `shell_execute` with three-tier governance: safe commands run; risky ones (checkout of an
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
  runsPrograms: true,
  description:
    'Run a command in your workspace, without a shell: no pipes, redirections, globs or $(…). Read-only commands and ordinary git work run at once; risky commands wait for a human approval; destructive ones (force push) are refused.',
  schema: shellSchema,
  sideEffecting: true,
  summarize: (a) => `shell_execute: ${commandText(a.command)}`.slice(0, 120),
  govern: async (a, ctx) => toGovernance(await evaluate(a.command, ctx)),
  run: async (a, ctx) => {
    const verdict = await evaluate(a.command, ctx);
    // Re-checked at run time: a denial can never be bypassed, whatever happened before.
    if (verdict.tier === 'deny' || !verdict.invocations)
      return { content: `Refused: ${verdict.reason}`, isError: true };
    // The workspace changed between judging and running (a link appeared, a remote moved): ask first.
    if (verdict.tier === 'approval' && !ctx.approved)
      return { content: `Not run: it now needs approval: ${verdict.reason}. Call it again to ask.`, isError: true };
    // A human approved this call: the remote URLs it runs under are approved from now on.
    if (verdict.tier === 'approval' && verdict.unknownRemoteUrls && verdict.unknownRemoteUrls.length > 0) {
      await recordRemoteUrls(
        ctx.db,
        await fs.realpath(ctx.workspaceDir),
        verdict.unknownRemoteUrls,
        'approved',
        ctx.agentId,
      );
    }
    const remotes = await remoteAccess(ctx);
    const runGit = gitRunner(ctx, remotes);
    let identity: GitIdentity | undefined;
    // Everything above judges and reads (the database among others): the command may run from here.
    await effectBegins(ctx);
    const execution = await executeShellCommand(verdict.invocations, {
      cwd: ctx.workspaceDir,
      signal: ctx.signal,
      timeoutMs: a.timeout_seconds ? a.timeout_seconds * 1000 : undefined,
      remotes,
      // What an earlier step changed is judged again before the next one runs: a link it checked out,
      // and, for a push, the ref updates git now reports.
      beforeStep: async (argv, index) => {
        if (index > 0) {
          const paths = await confinePaths([argv], ctx.workspaceDir);
          if (paths.tier !== 'allow') return `${paths.reason} (judged again after the previous step)`;
          // `git init && git commit` in one call: the repository the first step made commits as the agent too.
          if (argv[0] === 'git') {
            identity ??= await agentIdentity(ctx);
            if (identity) await applyGitIdentity(ctx.workspaceDir, identity);
          }
        }
        if (isGitPush(argv)) {
          const push = await judgePushByGit(argv, runGit, ctx.agentConfig.protectedBranches);
          if (push.tier === 'deny' || (push.tier === 'approval' && !ctx.approved)) return push.reason;
        }
        return undefined;
      },
    });
    const parts = execution.steps.map(({ argv, result }) => {
      if (result.refused)
        return `$ ${argv.join(' ')}\n[not run: it now needs approval: ${result.refused}. Call it again to ask.]`;
      return [
        `$ ${argv.join(' ')}`,
        `[${describeStatus(result)}, ${result.durationMs} ms${result.truncated ? ', output truncated' : ''}]`,
        result.stdout,
        result.stderr && `[stderr]\n${result.stderr}`,
      ]
        .filter(Boolean)
        .join('\n');
    });
    const redactions = execution.steps.reduce((sum, step) => sum + (step.result.redactions ?? 0), 0);
    return {
      content: parts.join('\n\n') || '(no output)',
      isError: !execution.succeeded,
      ...(redactions > 0 ? { redactions } : {}),
    };
  },
});
// Its run reads the database before the command starts: its ledger row is written at `effectBegins`.
startsItsOwnEffect(shellExecute);

/** How a step ended, as the model reads it: a sandbox limit is named as such. */
export function describeStatus(result: RunResult): string {
  if (result.cancelled) return 'cancelled';
  if (result.timedOut) return 'timed out';
  if (result.limit) return `${result.limit}; exit code ${result.exitCode ?? result.signal}`;
  return `exit code ${result.exitCode ?? result.signal}`;
}

async function agentIdentity(ctx: ToolContext): Promise<GitIdentity | undefined> {
  const agent = await findAgent(ctx.db, ctx.agentId);
  return agent ? agentGitIdentity(agent) : undefined;
}

function isGitPush(argv: readonly string[]): boolean {
  return argv[0] === 'git' && splitGitArgv(argv).subcommand === 'push';
}

function commandText(command: string | string[]): string {
  return Array.isArray(command) ? command.join(' ') : command;
}

export type GovernedEvaluation = ShellEvaluation & { unknownRemoteUrls?: string[] };

export interface RepositoryConfigVerdict {
  tier: 'allow' | 'approval' | 'deny';
  reason: string;
  unknownRemoteUrls: string[];
  /** Names of the remotes configured in the repository (`remote.<name>.url`); undefined when not known. */
  remoteNames?: readonly string[];
}

export interface ShellGovernanceOptions {
  workspaceDir: string;
  protectedBranches?: readonly string[];
  existingBranches?: readonly string[];
  existingRefs?: readonly string[];
  /** Judges the repository's configuration; called only when the command runs git. */
  judgeRepositoryConfig: () => Promise<RepositoryConfigVerdict>;
  /** Runs git in the workspace's sandbox, for asking git what a push would change; without it pushes are judged by their refspecs only. */
  runGit?: GitRunner;
}

/**
 * The full governance of one `shell_execute` command: the classifier's tier, then path confinement,
 * then (for git) the repository configuration; the strictest wins.
 */
export async function governShellCommand(
  command: string | string[],
  opts: ShellGovernanceOptions,
): Promise<GovernedEvaluation> {
  const verdict = await evaluateShellCommand(command, {
    protectedBranches: opts.protectedBranches,
    existingBranches: opts.existingBranches,
    existingRefs: opts.existingRefs,
  });
  if (verdict.tier === 'deny' || !verdict.invocations) return verdict;
  let decision = strictest(verdict, await confinePaths(verdict.invocations, opts.workspaceDir));
  let unknownRemoteUrls: string[] | undefined;
  if (decision.tier !== 'deny' && verdict.invocations.some(runsGit)) {
    const config = await opts.judgeRepositoryConfig();
    unknownRemoteUrls = config.unknownRemoteUrls;
    if (config.tier !== 'allow') decision = strictest(decision, { tier: config.tier, reason: config.reason });
    if (config.remoteNames) {
      for (const argv of verdict.invocations) decision = strictest(decision, judgeRemoteName(argv, config.remoteNames));
    }
  }
  // Git itself says what a push would change; only the first invocation is judged now, because a later
  // one depends on what runs before it (it is judged again right before it runs).
  const first = verdict.invocations[0];
  if (decision.tier === 'allow' && opts.runGit && first && isGitPush(first)) {
    decision = strictest(decision, await judgePushByGit(first, opts.runGit, opts.protectedBranches));
  }
  return { ...decision, invocations: verdict.invocations, unknownRemoteUrls };
}

/**
 * A remote named on the command line must be one of the repository's configured remotes: a folder
 * or file in the workspace (a bare repository the agent wrote, a `gitdir:` pointer) is never taken
 * as a remote, and neither is a URL or a path.
 */
function judgeRemoteName(argv: readonly string[], remoteNames: readonly string[]): ShellDecision {
  if (argv[0] !== 'git') return { tier: 'allow', reason: 'not git' };
  const line = splitGitArgv(argv);
  if (line.subcommand === undefined || !REMOTE_NAMING_SUBCOMMANDS.has(line.subcommand))
    return { tier: 'allow', reason: 'names no remote' };
  const remote = firstPositional(line.args);
  if (remote === undefined || remoteNames.includes(remote)) return { tier: 'allow', reason: 'a configured remote' };
  return approval(
    `\`git ${line.subcommand} ${remote}\`: ${JSON.stringify(remote)} is not a configured remote of this repository ` +
      `(${remoteNames.length > 0 ? remoteNames.join(', ') : 'it has none'}); a folder, file, path or URL is never used as a remote without approval`,
  );
}

function firstPositional(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i] as string;
    if (arg === '--') return args[i + 1];
    if (
      arg === '-o' ||
      arg === '--push-option' ||
      arg === '--repo' ||
      arg === '--upload-pack' ||
      arg === '--receive-pack'
    ) {
      i += 1;
      continue;
    }
    if (!arg.startsWith('-')) return arg;
  }
  return undefined;
}

async function evaluate(command: string | string[], ctx: ToolContext): Promise<GovernedEvaluation> {
  // Without the sandbox nothing runs: say so plainly instead of failing inside a probe.
  const sandbox = await sandboxStatus().catch((error: unknown) => ({
    level: 'error' as const,
    message: error instanceof Error ? error.message : String(error),
  }));
  if (sandbox.level === 'error') return { tier: 'deny', reason: sandbox.message };
  const refs = await listRefs(ctx.workspaceDir, ctx.signal);
  return governShellCommand(command, {
    workspaceDir: ctx.workspaceDir,
    protectedBranches: ctx.agentConfig.protectedBranches,
    existingBranches: refs.filter((ref) => ref.startsWith('refs/heads/')).map((ref) => ref.slice('refs/heads/'.length)),
    existingRefs: refs,
    judgeRepositoryConfig: () => judgeRepositoryConfig(ctx),
    runGit: gitRunner(ctx, await remoteAccess(ctx)),
  });
}

function gitRunner(ctx: ToolContext, remotes: readonly RemoteAccess[]): GitRunner {
  return (argv) =>
    runInvocation(argv, { cwd: ctx.workspaceDir, signal: ctx.signal, timeoutMs: PUSH_PROBE_TIMEOUT_MS, remotes });
}

/**
 * What git's network commands may reach in the sandbox: the workspace's recorded remote URLs (first
 * sight or approved by a human). A path is bound in at that path; a network URL shares the network.
 */
async function remoteAccess(ctx: ToolContext): Promise<RemoteAccess[]> {
  const workspace = await fs.realpath(ctx.workspaceDir);
  const known = await knownRemoteUrls(ctx.db, workspace);
  const access: RemoteAccess[] = [];
  for (const url of known.urls) {
    if (url === FIRST_SIGHT_MARKER) continue;
    if (/^file:\/\//i.test(url)) {
      access.push({ kind: 'path', path: decodeURIComponent(new URL(url).pathname), writable: true });
    } else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url) || /^[^/:]+:/.test(url)) {
      // A URL with a scheme, or scp-like `host:path`.
      access.push({ kind: 'network' });
    } else {
      access.push({ kind: 'path', path: path.resolve(workspace, url), writable: true });
    }
  }
  return access;
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
  if (!config.ok)
    return {
      tier: 'deny',
      reason: `the repository configuration cannot be read (${config.error}); git does not run under configuration it cannot check`,
      unknownRemoteUrls: [],
    };
  const inRepository = config.entries.some((entry) => !entry.origin.startsWith('command line'));
  const workspace = await fs.realpath(ctx.workspaceDir);
  let known = await knownRemoteUrls(ctx.db, workspace);
  if (!known.seen && inRepository) {
    const urls = config.entries
      .filter((e) => /^remote\..+\.(url|pushurl)$/i.test(e.key) && !e.origin.startsWith('command line'))
      .map((e) => e.value);
    await recordRemoteUrls(ctx.db, workspace, [FIRST_SIGHT_MARKER, ...urls], 'first-sight', ctx.agentId);
    known = await knownRemoteUrls(ctx.db, workspace);
  }
  const judged = judgeConfig(config.entries, known.urls);
  const remoteNames = new Set<string>();
  for (const entry of config.entries) {
    const match = /^remote\.(.+)\.url$/i.exec(entry.key);
    if (match?.[1] && !entry.origin.startsWith('command line')) remoteNames.add(match[1]);
  }
  return {
    tier: judged.tier,
    reason: judged.reason,
    unknownRemoteUrls: judged.unknownRemoteUrls,
    remoteNames: [...remoteNames],
  };
}

/** Recorded for a workspace whose repository had no remotes when first seen. */
const FIRST_SIGHT_MARKER = '';

function toGovernance(verdict: ShellEvaluation): GovernanceDecision {
  if (verdict.tier === 'allow') return { tier: 'allow' };
  return { tier: verdict.tier, reason: verdict.reason };
}

/** Every local ref, for "checkout of an existing branch needs approval" resolved as git does; empty outside a repository. */
async function listRefs(workspaceDir: string, signal: AbortSignal): Promise<string[]> {
  if (!existsSync(path.join(workspaceDir, '.git'))) return [];
  const result = await runInvocation(['git', 'for-each-ref', '--format=%(refname)'], {
    cwd: workspaceDir,
    signal,
    timeoutMs: BRANCH_LIST_TIMEOUT_MS,
  });
  return result.exitCode === 0
    ? result.stdout
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean)
    : [];
}
