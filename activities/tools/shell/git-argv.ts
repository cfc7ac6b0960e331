/**
 * Where git's own (global) options end and the subcommand begins. Shared by the classifier, which
 * judges the global options, and the runner, which inserts its hardening around the subcommand.
 */

/** Global options that take the next argument as their value when written without `=`. */
const GLOBAL_OPTIONS_WITH_VALUE = new Set([
  '-C',
  '-c',
  '--git-dir',
  '--work-tree',
  '--namespace',
  '--config-env',
  '--super-prefix',
]);

export interface GitCommandLine {
  /** Global options (with their values) between `git` and the subcommand. */
  globals: string[];
  /** The subcommand, or undefined for `git --version` and the like. */
  subcommand: string | undefined;
  /** Index of the subcommand in the original argv (argv.length when there is none). */
  subcommandIndex: number;
  /** Arguments after the subcommand. */
  args: string[];
}

/** Splits `['git', ...]` into global options, subcommand and its arguments. */
export function splitGitArgv(argv: readonly string[]): GitCommandLine {
  const globals: string[] = [];
  let index = 1;
  while (index < argv.length) {
    const arg = argv[index] as string;
    if (!arg.startsWith('-')) break;
    globals.push(arg);
    index += 1;
    if (GLOBAL_OPTIONS_WITH_VALUE.has(arg) && index < argv.length) {
      globals.push(argv[index] as string);
      index += 1;
    }
  }
  const subcommand = argv[index];
  return {
    globals,
    subcommand,
    subcommandIndex: subcommand === undefined ? argv.length : index,
    args: subcommand === undefined ? [] : argv.slice(index + 1),
  };
}
