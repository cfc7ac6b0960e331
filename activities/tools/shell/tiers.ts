/**
 * The three governance tiers ("Git command governance"): `allow` runs at once, `approval`
 * pauses for a human decision, `deny` never runs. Anything the classifier cannot prove safe is at
 * least `approval`.
 */

export type ShellTier = 'allow' | 'approval' | 'deny';

export interface ShellDecision {
  tier: ShellTier;
  /** One sentence for the agent and the approver: what the command does that decided the tier. */
  reason: string;
}

export interface ShellPolicyContext {
  /**
   * Branch names or `*` patterns that need approval to push to. Compared case-insensitively, since a
   * case-insensitive filesystem on either side can make `Main` and `main` the same ref.
   * Default: `main`, `master`, `release/*`, `production`.
   */
  protectedBranches?: readonly string[];
  /**
   * Local branches that exist right now (read just before classifying). Switching to one of them
   * needs approval; without this list a plain `git switch <name>` cannot be proved to create a branch.
   */
  existingBranches?: readonly string[];
  /**
   * Every local ref (`refs/heads/…`, `refs/tags/…`, `refs/remotes/…` …), read just before classifying,
   * so a branch move resolves its target as git does (a tag named like a branch, `refs/heads/x`).
   */
  existingRefs?: readonly string[];
}

const TIER_RANK: Record<ShellTier, number> = { allow: 0, approval: 1, deny: 2 };

export function allow(reason: string): ShellDecision {
  return { tier: 'allow', reason };
}

export function approval(reason: string): ShellDecision {
  return { tier: 'approval', reason };
}

export function deny(reason: string): ShellDecision {
  return { tier: 'deny', reason };
}

/** The stricter of two decisions (the first one wins a tie, so its reason is kept). */
export function strictest(first: ShellDecision, second: ShellDecision): ShellDecision {
  return TIER_RANK[second.tier] > TIER_RANK[first.tier] ? second : first;
}

/** An argv as a reader would type it, for reasons and approval prompts. */
export function displayArgv(argv: readonly string[]): string {
  return argv
    .map((arg) => (/^[A-Za-z0-9_\-./:=@%+,^]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`))
    .join(' ');
}
