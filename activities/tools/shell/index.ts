/**
 * The shell tool's façade: judge a command, then run the invocations it was reduced to.
 *
 * ```ts
 * const verdict = await evaluateShellCommand('git add -A && git commit -m "wip"', { protectedBranches: ['main'] });
 * // { tier: 'allow', reason: 'all 2 commands are allowed: …', invocations: [['git','add','-A'], ['git','commit','-m','wip']] }
 * if (verdict.tier === 'allow') await executeShellCommand(verdict.invocations!, { cwd: workspace, signal });
 * ```
 */
import { classifyCommand } from './classify';
import { parseCommand } from './parse';
import { DEFAULT_SHELL_TIMEOUT_MS, MAX_SHELL_TIMEOUT_MS } from './limits';
import { runInvocation, type RunOptions, type RunResult } from './run';
import type { ShellPolicyContext, ShellTier } from './tiers';

export { parseCommand, type ParsedCommand } from './parse';
export { classifyCommand, classifyInvocation } from './classify';
export { runInvocation, ShellCommandDeniedError, type RunOptions, type RunResult } from './run';
export { GitHardeningError } from './git-hardening';
export { SandboxUnavailableError } from './sandbox';
export type { ShellDecision, ShellPolicyContext, ShellTier } from './tiers';

export interface ShellEvaluation {
  tier: ShellTier;
  reason: string;
  /** The argument vectors that would run; absent when the command could not be parsed. */
  invocations?: string[][];
}

/**
 * Parses and classifies a command. A string that cannot be reduced to clean invocations (pipes, `;`,
 * expansions, redirections, syntax errors …) is `deny`, not `approval`: it fails closed, and an
 * approver is never asked to bless shell syntax that would not run as shown. The reason tells the
 * agent how to rewrite it.
 */
export async function evaluateShellCommand(
  command: string | string[],
  ctx: ShellPolicyContext = {},
): Promise<ShellEvaluation> {
  const parsed = await parseCommand(command);
  const decision = classifyCommand(parsed, ctx);
  return parsed.ok ? { ...decision, invocations: parsed.invocations } : decision;
}

export interface ShellStepResult {
  argv: string[];
  result: RunResult;
}

export interface ShellExecution {
  /** One entry per invocation that ran, in order. */
  steps: ShellStepResult[];
  /** True when every invocation ran and exited 0. */
  succeeded: boolean;
}

/**
 * Runs invocations one after another like `&&`: stops at the first that does not exit 0 (or times
 * out, or is cancelled). `timeoutMs` bounds the whole sequence, not each step. Denied invocations
 * throw `ShellCommandDeniedError` (see `runInvocation`).
 */
export interface ExecuteOptions extends RunOptions {
  /**
   * Called right before each invocation runs; a returned sentence stops the sequence there (the step
   * is reported as refused). Lets the caller judge again what an earlier step may have changed: a link
   * checked out by the previous command, the refs a push would now update.
   */
  beforeStep?: (argv: string[], index: number) => Promise<string | undefined>;
}

export async function executeShellCommand(invocations: string[][], opts: ExecuteOptions): Promise<ShellExecution> {
  const deadline = Date.now() + Math.min(opts.timeoutMs ?? DEFAULT_SHELL_TIMEOUT_MS, MAX_SHELL_TIMEOUT_MS);
  const steps: ShellStepResult[] = [];
  const { beforeStep, ...runOptions } = opts;
  for (const [index, argv] of invocations.entries()) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      steps.push({ argv, result: timedOutBeforeStart() });
      return { steps, succeeded: false };
    }
    const refusal = await beforeStep?.(argv, index);
    if (refusal !== undefined) {
      steps.push({ argv, result: { ...timedOutBeforeStart(), timedOut: false, refused: refusal } });
      return { steps, succeeded: false };
    }
    const result = await runInvocation(argv, { ...runOptions, timeoutMs: remaining });
    steps.push({ argv, result });
    if (result.exitCode !== 0 || result.timedOut || result.cancelled) return { steps, succeeded: false };
  }
  return { steps, succeeded: true };
}

function timedOutBeforeStart(): RunResult {
  return {
    exitCode: null,
    signal: null,
    stdout: '',
    stderr: '',
    truncated: false,
    durationMs: 0,
    timedOut: true,
    cancelled: false,
  };
}
