/**
 * Reads a workspace repository's effective configuration the way git itself will see it (includes
 * resolved, each entry with its origin), with git hardened so reading runs nothing.
 */
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { parseConfigListing, type ConfigEntry } from '../../security/git-config-policy';
import { hardeningPrefix } from './git-hardening';
import { GIT_PROBE_OUTPUT_BYTES, GIT_PROBE_TIMEOUT_MS } from './limits';
import { gitEnvironment, resolveOnRunnerPath, RUNNER_PATH } from './run';
import { prepareCommand, SANDBOX_HOME } from './sandbox';

export type EffectiveConfig = { ok: true; entries: ConfigEntry[] } | { ok: false; error: string };

/**
 * `git config --list --show-origin --includes --null` in `cwd` (the workspace), read inside the
 * sandbox like every git run, so an include can only reach what the command itself could; outside a
 * repository only command-line entries come back.
 */
export async function readEffectiveGitConfig(cwd: string, signal?: AbortSignal): Promise<EffectiveConfig> {
  const workspace = await fs.realpath(cwd);
  const env = { PATH: RUNNER_PATH, HOME: SANDBOX_HOME, LANG: 'C.UTF-8', ...gitEnvironment(workspace) };
  const git = await resolveOnRunnerPath('git');
  if (git === undefined) return { ok: false, error: 'git is not installed' };
  let command;
  try {
    command = await prepareCommand(
      git,
      [...hardeningPrefix(), 'config', '--list', '--show-origin', '--includes', '--null'],
      { workspace, cwd: workspace, env },
    );
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
  return new Promise((resolve) => {
    execFile(
      command.file,
      command.args,
      {
        cwd: command.cwd,
        env: command.env,
        signal,
        timeout: GIT_PROBE_TIMEOUT_MS,
        maxBuffer: GIT_PROBE_OUTPUT_BYTES,
        encoding: 'utf8',
      },
      (error, stdout, stderr) => {
        if (error)
          resolve({ ok: false, error: (stderr || error.message).trim().split('\n')[0] ?? 'git config failed' });
        else resolve({ ok: true, entries: parseConfigListing(stdout) });
      },
    );
  });
}
