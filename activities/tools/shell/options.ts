/**
 * Small helpers for reading command-line options the way GNU getopt and git's parse-options do.
 * They err towards seeing an option where there may be none: a false match only makes a check
 * stricter (approval or deny), never more permissive.
 */

/** The name of a long option without dashes and value (`--force-with-lease=x` → `force-with-lease`). */
export function longOptionName(arg: string): string | undefined {
  if (!arg.startsWith('--') || arg === '--') return undefined;
  return arg.slice(2).split('=')[0];
}

/**
 * True when `arg` is a long option that is, or abbreviates, one of `names`. Both getopt_long and git
 * accept any unambiguous prefix, so `--forc` means `--force` and `--rece=x` means `--receive-pack=x`.
 */
export function isLongOptionFor(arg: string, names: readonly string[]): boolean {
  const name = longOptionName(arg);
  if (name === undefined || name === '') return false;
  return names.some((candidate) => candidate.startsWith(name));
}

/** True when `arg` is a short-option cluster (`-rf`, `-n5`) containing any of `letters`. */
export function isShortCluster(arg: string, letters: string): boolean {
  if (!/^-[^-]/.test(arg)) return false;
  for (const letter of arg.slice(1)) if (letters.includes(letter)) return true;
  return false;
}

/** True when any argument is a short-option cluster containing one of `letters`. */
export function hasShortOption(args: readonly string[], letters: string): boolean {
  return args.some((arg) => isShortCluster(arg, letters));
}

/** True when any argument is, or abbreviates, one of the long options `names`. */
export function hasLongOption(args: readonly string[], names: readonly string[]): boolean {
  return args.some((arg) => isLongOptionFor(arg, names));
}

/** Arguments that are not options: everything not starting with '-', and everything after `--`. */
export function positionalArguments(args: readonly string[]): string[] {
  const positionals: string[] = [];
  let afterDoubleDash = false;
  for (const arg of args) {
    if (afterDoubleDash) positionals.push(arg);
    else if (arg === '--') afterDoubleDash = true;
    else if (!arg.startsWith('-') || arg === '-') positionals.push(arg);
  }
  return positionals;
}
