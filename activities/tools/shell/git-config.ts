/**
 * Reads a workspace repository's effective configuration the way git itself will see it (includes
 * resolved, each entry with its origin), with git hardened so reading runs nothing.
 */
import { execFile } from 'node:child_process';
import os from 'node:os';
import { parseConfigListing, type ConfigEntry } from '../../security/git-config-policy';
import { GIT_HARDENING_ENV, hardeningPrefix } from './git-hardening';
import { GIT_PROBE_OUTPUT_BYTES, GIT_PROBE_TIMEOUT_MS } from './limits';
import { RUNNER_PATH } from './run';

export type EffectiveConfig = { ok: true; entries: ConfigEntry[] } | { ok: false; error: string };

/** `git config --list --show-origin --includes --null` in `cwd`; outside a repository only command-line entries come back. */
export function readEffectiveGitConfig(cwd: string, signal?: AbortSignal): Promise<EffectiveConfig> {
  return new Promise((resolve) => {
    execFile(
      'git',
      [...hardeningPrefix(), 'config', '--list', '--show-origin', '--includes', '--null'],
      {
        cwd,
        env: { PATH: RUNNER_PATH, HOME: os.tmpdir(), LANG: 'C.UTF-8', ...GIT_HARDENING_ENV },
        signal,
        timeout: GIT_PROBE_TIMEOUT_MS,
        maxBuffer: GIT_PROBE_OUTPUT_BYTES,
        encoding: 'utf8',
      },
      (error, stdout, stderr) => {
        if (error) resolve({ ok: false, error: (stderr || error.message).trim().split('\n')[0] ?? 'git config failed' });
        else resolve({ ok: true, entries: parseConfigListing(stdout) });
      },
    );
  });
}
