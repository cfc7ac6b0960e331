/**
 * Every number the shell tool depends on, in one place. The timeouts, the output
 * buffer and the protected branches follow the product design (docs/seed-coverage.md); the others are this
 * runtime's choices.
 */

/** A shell command gets 60 s unless the caller asks for more. */
export const DEFAULT_SHELL_TIMEOUT_MS = 60_000;

/** No single command may run longer than 300 s, whatever the caller asks for. */
export const MAX_SHELL_TIMEOUT_MS = 300_000;

/** The output buffer is 2 MB; applied per stream (stdout and stderr each). */
export const DEFAULT_MAX_OUTPUT_CHARS = 2 * 1024 * 1024;

/**
 * Share of the output cap kept from the start of a stream; the rest is kept from its end, because
 * the end of a command's output usually holds the error or the summary.
 */
export const TRUNCATION_HEAD_FRACTION = 0.4;

/**
 * After SIGTERM, how long the process group gets to exit before SIGKILL. Short enough that a
 * cancelled activity still settles well within the 5 s the workflow contract promises.
 */
export const KILL_GRACE_MS = 1_500;

/**
 * After the child exits (or is killed), how long to wait for its pipes to close. A grandchild that
 * escaped the process group (setsid) can hold them open forever; we stop waiting and close our ends.
 */
export const PIPE_DRAIN_MS = 300;

/** A command string longer than this is refused: it bounds parse work and what an approver must read. */
export const MAX_COMMAND_CHARS = 64 * 1024;

/** Wrapper commands (`sudo env timeout git …`) are looked through at most this deep. */
export const MAX_WRAPPER_DEPTH = 4;

/**
 * Submodule git directories scanned for command-running config (filters, diff drivers …). Bounds the
 * work done before every git invocation in a repository with very many submodules.
 */
export const MAX_SCANNED_GIT_DIRS = 64;

/** Git runs a few helper commands before the real one (config scan); each gets at most this long. */
export const GIT_PROBE_TIMEOUT_MS = 10_000;

/** Branches that need approval to push to when the caller names none ("protected branches"). */
export const DEFAULT_PROTECTED_BRANCHES: readonly string[] = ['main', 'master', 'release/*', 'production'];

/** How deep submodule git directories are looked for under `.git/modules` (names may contain '/'). */
export const MAX_SUBMODULE_PATH_DEPTH = 8;

/** Output a git config listing may produce before the scan gives up (and git is not run). */
export const GIT_PROBE_OUTPUT_BYTES = 64 * 1024 * 1024;

/**
 * Sandbox: CPU seconds a tool process may use. Equal to the longest wall time a command may have, so
 * the limit only bites on work that the wall clock would not stop (a process that spins in many threads).
 */
export const SANDBOX_CPU_SECONDS = MAX_SHELL_TIMEOUT_MS / 1000;

/** Sandbox: largest file a tool process may write (RLIMIT_FSIZE); far above source files and build outputs, far below a full disk. */
export const SANDBOX_FILE_SIZE_BYTES = 1024 * 1024 * 1024;

/** Sandbox: address space per process (RLIMIT_AS); enough for git on a large repository and for Node, not for a runaway allocation. */
export const SANDBOX_ADDRESS_SPACE_BYTES = 8 * 1024 * 1024 * 1024;

/** Sandbox: processes at once (RLIMIT_NPROC and the PID-namespace watch); a build's parallel jobs fit, a fork bomb does not. */
export const SANDBOX_MAX_PROCESSES = 256;

/** Sandbox: how long the one-time check that bubblewrap works may take. */
export const SANDBOX_PROBE_TIMEOUT_MS = 10_000;
