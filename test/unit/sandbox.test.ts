/**
 * The sandbox alone holds (issue 18). Every reproduction of the issue runs here as an inline shell
 * script through `runProgram`, the runner below the classifier: nothing is judged, the model's
 * commands run as written, and the kernel is the only boundary. The worker's environment holds
 * canary secrets, a canary file sits outside the workspace, and the workspace is a plain folder
 * inside a host checkout (with its own `.env` secret). Each escape must leave every path outside the
 * workspace byte-identical and no canary secret in any encoding in the output.
 *
 * Then the limits: a fork bomb, a 10 GB write and an endless loop are each stopped and reported as
 * what they were, and the process that ran them carries on.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describeStatus } from '../../activities/tools/shell-tool';
import { runInvocation, runProgram, type RunResult } from '../../activities/tools/shell/run';
import {
  BWRAP_PATH_SETTING,
  forgetSandboxCheck,
  SANDBOX_SETTING,
  SandboxUnavailableError,
  sandboxMode,
} from '../../activities/tools/shell/sandbox';
import { HeadTailBuffer } from '../../activities/tools/shell/output-buffer';
import { redactSecrets } from '../../activities/security/secrets';
import { findLeakedPieces, git, GIT_ENV, snapshot } from '../support/canaries';

const KEY_SECRET = `sk-canary${randomUUID().replaceAll('-', '')}`;
const DB_PASSWORD = `pw${randomUUID().replaceAll('-', '')}`;
const FILE_SECRET = `file${randomUUID().replaceAll('-', '')}`;
const ENV_FILE_SECRET = `dotenv${randomUUID().replaceAll('-', '')}`;
const SECRETS = [KEY_SECRET, DB_PASSWORD, FILE_SECRET, ENV_FILE_SECRET];
const leakedPieces = (text: string): string[] => findLeakedPieces(text, SECRETS);

let host: string;
let workspace: string;
/** A process whose real environment (its /proc/<pid>/environ) holds the canary secrets, as the worker's does. */
let holder: ChildProcess;
let outside: string;
let remote: string;

const CANARY_ENV = {
  SANDBOX_CANARY_API_KEY: KEY_SECRET,
  SANDBOX_CANARY_DATABASE_URL: `postgres://agent:${DB_PASSWORD}@127.0.0.1:5439/db`,
};

beforeAll(() => {
  Object.assign(process.env, CANARY_ENV);
  holder = spawn('sleep', ['600'], { env: { ...process.env, ...CANARY_ENV }, stdio: 'ignore' });
  outside = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'sbx-outside-')));
  writeFileSync(path.join(outside, 'secret.txt'), `token=${FILE_SECRET}\n`);
  remote = path.join(outside, 'remote.git');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', remote], { env: GIT_ENV });
  execFileSync('git', ['-C', remote, 'symbolic-ref', 'refs/heads/trunk', 'refs/heads/main'], { env: GIT_ENV });
  // A host checkout with an ignored .env; the workspace is a plain folder inside it, as the default
  // `.data/workspaces/<id>` is when the worker runs from a clone.
  host = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'sbx-host-')));
  git(host, 'init', '-q', '-b', 'main');
  writeFileSync(path.join(host, '.gitignore'), '.env\n.data/\n');
  writeFileSync(path.join(host, 'README.md'), 'host\n');
  git(host, 'add', '.');
  git(host, 'commit', '-q', '-m', 'host 1');
  writeFileSync(path.join(host, 'README.md'), 'host 2\n');
  git(host, 'commit', '-q', '-am', 'host 2');
  writeFileSync(path.join(host, '.env'), `ANTHROPIC_API_KEY=${ENV_FILE_SECRET}\n`);
  git(host, 'remote', 'add', 'origin', remote);
  git(host, 'push', '-q', 'origin', 'main');
  workspace = path.join(host, '.data', 'workspaces', 'agent-1');
  mkdirSync(workspace, { recursive: true });
});

afterAll(() => {
  holder.kill('SIGKILL');
  delete process.env.SANDBOX_CANARY_API_KEY;
  delete process.env.SANDBOX_CANARY_DATABASE_URL;
  rmSync(outside, { recursive: true, force: true });
  rmSync(host, { recursive: true, force: true });
});

/** Runs a shell script in the sandbox, as a model could if the classifier allowed everything. */
function unjudged(
  script: string,
  limits?: Parameters<typeof runProgram>[1]['limits'],
  timeoutMs = 30_000,
): Promise<RunResult> {
  return runProgram(['sh', '-c', script], { cwd: workspace, timeoutMs, limits });
}

/** Outside the workspace: the host checkout (minus the workspace itself) and the outside folder. */
function outsideState(): Record<string, string> {
  const state = { ...snapshot(outside), ...snapshot(host) };
  for (const key of Object.keys(state)) if (key.startsWith(`${workspace}/`)) delete state[key];
  return state;
}

const ESCAPES: Array<[string, () => string]> = [
  [
    'a workspace folder inside a checkout works on the host repository',
    () =>
      `git grep --untracked ANTHROPIC -- :/; git -C .. status; git checkout -b x HEAD~1; git switch main; git log --oneline; ls -la ${host}; echo pwned > ${host}/pwned-host; rm -rf ${host}/.git ${host}/README.md`,
  ],
  [
    'a bare repository in a workspace folder whose alternateRefsCommand reads the worker environment through /proc',
    () => `mkdir -p cache/objects/info cache/refs && touch cache/refs/.keep && : > cache/objects/info/alternates
     printf '[core]\\n\\tbare = true\\n\\talternateRefsCommand = sh ./run.sh\\n' > cache/config
     cat > cache/run.sh <<'EOF'
for p in /proc/[0-9]*; do base64 -w0 "$p/environ" 2>/dev/null; echo; done
pid=$$; while [ "$pid" -gt 1 ]; do pid=$(awk '{print $4}' /proc/$pid/stat); od -An -tx1 /proc/$pid/environ 2>/dev/null; done
EOF
     echo 'ref: refs/heads/main' > cache/HEAD
     git init -q -b main . 2>/dev/null; git -c user.name=a -c user.email=b commit -q --allow-empty -m x
     git push cache HEAD:x; env; cat /proc/*/environ | base64 -w0; cat /proc/@HOLDER@/environ`,
  ],
  [
    'a gitdir pointer file used as a remote name reaches another repository',
    () =>
      `printf 'gitdir: ${host}/.git\\n' > pointer && git ls-remote pointer; git fetch pointer main; git push pointer HEAD:evil; git --git-dir=${host}/.git log --oneline`,
  ],
  [
    'name lists (--files0-from, file -f) read files outside the workspace and /proc',
    () => `printf '${outside}/secret.txt\\0${host}/.env\\0/proc/1/environ\\0/proc/self/environ\\0' > list && printf '${outside}/secret.txt\\n${host}/.env\\n' > list2
     sort --files0-from=list; wc --files0-from=list; du --files0-from=list; find -files0-from list; file -f list2; cat ${outside}/secret.txt ${host}/.env`,
  ],
  [
    'git config --includes / --system / --blob read the user and system configuration',
    () =>
      `printf '[include]\\n\\tpath = /root/.gitconfig\\n' > f && git config --file f --includes --list; git config --system --list; git config --global --list; cat /root/.gitconfig /etc/gitconfig /etc/shadow; ls /root`,
  ],
  [
    'symbolic links followed in one chain',
    () =>
      `ln -s ${outside}/secret.txt link && cat link; ln -s ${host}/.env envlink && cat envlink; ln -s / rootlink && ls rootlink/root rootlink/work; echo escaped > link`,
  ],
  [
    'tag, notes and symref-alias pushes, and pruning, straight to the remote path',
    () =>
      `git tag v1 2>/dev/null; git push ${remote} v1; git notes add -m n 2>/dev/null; git push ${remote} 'refs/notes/*'; git push ${remote} HEAD:trunk; git fetch ${remote} --prune --prune-tags`,
  ],
  [
    'the network, the worker processes and the outside file system',
    () =>
      `bash -c 'echo > /dev/tcp/127.0.0.1/5439' && echo connected; ls /proc; cat /proc/1/cmdline; od -c /proc/@HOLDER@/environ; ls /; touch ${outside}/pwned-direct; echo x >> ${outside}/secret.txt; env`,
  ],
];

describe('the sandbox alone holds (no classifier)', () => {
  const outputs: string[] = [];

  test.each(ESCAPES)('%s', async (_name, script) => {
    const before = outsideState();
    const result = await unjudged(script().replaceAll('@HOLDER@', String(holder.pid)));
    outputs.push(result.stdout, result.stderr);
    expect(result.cancelled).toBe(false);
    expect(result.timedOut).toBe(false);
    expect(outsideState()).toEqual(before);
    expect(readdirSync(outside).filter((name) => name.startsWith('pwned'))).toEqual([]);
    expect(existsSync(path.join(host, 'pwned-host'))).toBe(false);
    expect(leakedPieces(`${result.stdout}\n${result.stderr}`)).toEqual([]);
  });

  test('the outputs of all escapes together hold no piece of any secret (a secret split across calls)', () => {
    expect(outputs.length).toBe(ESCAPES.length * 2);
    expect(leakedPieces(outputs.join(''))).toEqual([]);
    expect(leakedPieces(outputs.join('\n'))).toEqual([]);
  });

  test('control: the same secret checks find the secrets when they are there', () => {
    const sample = `x ${Buffer.from(`KEY=${KEY_SECRET}`).toString('base64')} y ${Buffer.from(DB_PASSWORD).toString('hex')} ${FILE_SECRET.slice(0, 12)}`;
    expect(leakedPieces(sample).length).toBeGreaterThan(3);
  });

  test('control: without the sandbox the first escape reads the worker environment', async () => {
    const control = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'sbx-control-')));
    try {
      const out = execFileSync('sh', ['-c', `cat /proc/${holder.pid}/environ | base64 -w0`], {
        cwd: control,
        encoding: 'utf8',
      });
      expect(leakedPieces(out).length).toBeGreaterThan(0);
    } finally {
      rmSync(control, { recursive: true, force: true });
    }
  });

  test('inside, git sees only the workspace: discovery stops, and the host checkout and its .env do not exist', async () => {
    // A second, plain workspace folder in the same checkout (the first one has become a repository).
    const plain = path.join(host, '.data', 'workspaces', 'agent-2');
    mkdirSync(plain, { recursive: true });
    const result = await runProgram(
      ['sh', '-c', `git rev-parse --show-toplevel; git status; ls ${host}; ls -a ..; echo HOME=$HOME`],
      { cwd: plain, timeoutMs: 30_000 },
    );
    expect(result.stderr).toMatch(/not a git repository/);
    expect(result.stdout).not.toContain('README.md');
    expect(result.stdout).not.toContain('.env');
    expect(result.stdout).toContain('HOME=/tmp/home');
  });

  test('the workspace is writable, /usr is not, /tmp is private', async () => {
    const marker = `sbx-tmp-${randomUUID()}`;
    const result = await unjudged(
      `echo ok > in-workspace.txt && touch /tmp/${marker} && ls /tmp; touch /usr/pwned; echo done`,
    );
    expect(readFileSync(path.join(workspace, 'in-workspace.txt'), 'utf8')).toBe('ok\n');
    expect(result.stdout).toContain(marker);
    expect(existsSync(path.join('/tmp', marker))).toBe(false);
    expect(result.stderr).toMatch(/Read-only file system/);
    expect(existsSync('/usr/pwned')).toBe(false);
  });
});

describe('resource limits stop runaway commands and say what stopped them', () => {
  // These payloads are real: never start them without the sandbox (AGENTS_SANDBOX=off in the environment).
  beforeEach(() => expect(sandboxMode()).toBe('bwrap'));

  test('a fork bomb is stopped at the process limit', async () => {
    const started = Date.now();
    const result = await unjudged('bomb() { bomb | bomb & }; bomb; sleep 20', { processes: 64 }, 30_000);
    expect(result.timedOut).toBe(false);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(result.limit).toBe('killed: process limit of 64 processes reached (the whole sandbox was stopped)');
    expect(describeStatus(result)).toMatch(/^killed: process limit of 64 processes reached/);
    // The process that ran it carries on, and the next command runs normally.
    const after = await runInvocation(['echo', 'still here'], { cwd: workspace });
    expect({ stdout: after.stdout, stderr: after.stderr, exitCode: after.exitCode }).toEqual({
      stdout: 'still here\n',
      stderr: '',
      exitCode: 0,
    });
  });

  test('a 10 GB write is stopped at the file size limit', async () => {
    const limit = 8 * 1024 * 1024;
    const result = await unjudged('head -c 10G /dev/zero > big.bin', { fileSizeBytes: limit }, 60_000);
    expect(result.timedOut).toBe(false);
    expect(result.limit).toBe('stopped: file size limit of 8 MiB per file');
    expect(statSync(path.join(workspace, 'big.bin')).size).toBeLessThanOrEqual(limit);
    expect(describeStatus(result)).toMatch(/^stopped: file size limit of 8 MiB per file; exit code/);
    rmSync(path.join(workspace, 'big.bin'));
  });

  test('an endless loop is stopped at the CPU time limit', async () => {
    const result = await unjudged('while :; do :; done', { cpuSeconds: 1 }, 30_000);
    expect(result.timedOut).toBe(false);
    expect(result.limit).toBe('killed: CPU time limit of 1 s');
    expect(describeStatus(result)).toMatch(/^killed: CPU time limit of 1 s; exit code/);
  });

  test('an endless loop under the default limits ends at the wall-clock timeout, reported as such', async () => {
    const result = await unjudged('while :; do :; done', undefined, 1_000);
    expect(result.timedOut).toBe(true);
    expect(describeStatus(result)).toBe('timed out');
  });
});

describe('no sandbox, no tools (unless the operator opts out, loudly)', () => {
  afterEach(() => {
    delete process.env[BWRAP_PATH_SETTING];
    delete process.env[SANDBOX_SETTING];
    forgetSandboxCheck();
  });

  test('bubblewrap missing: the command is refused with a clear error, nothing runs', async () => {
    process.env[BWRAP_PATH_SETTING] = '/nonexistent/bwrap';
    forgetSandboxCheck();
    await expect(runInvocation(['touch', 'ran-unsandboxed'], { cwd: workspace })).rejects.toThrow(
      SandboxUnavailableError,
    );
    await expect(runInvocation(['touch', 'ran-unsandboxed'], { cwd: workspace })).rejects.toThrow(
      /tool sandbox unavailable: bubblewrap is not installed .*AGENTS_SANDBOX=off/,
    );
    expect(existsSync(path.join(workspace, 'ran-unsandboxed'))).toBe(false);
  });

  test('an unknown setting is an error, not a downgrade', async () => {
    process.env[SANDBOX_SETTING] = 'maybe';
    await expect(runInvocation(['true'], { cwd: workspace })).rejects.toThrow(
      /AGENTS_SANDBOX="maybe" is not allowed: "bwrap" \(the default\) or "off"/,
    );
  });

  test('AGENTS_SANDBOX=off runs unsandboxed with a loud warning', async () => {
    process.env[SANDBOX_SETTING] = 'off';
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const result = await runInvocation(['ls', '/'], { cwd: workspace });
      expect(result.stdout).toContain('work');
      expect(String(warn.mock.calls[0]?.[0])).toMatch(/WITHOUT THE KERNEL SANDBOX/);
    } finally {
      warn.mockRestore();
    }
  });
});

describe('redaction runs before truncation', () => {
  test('a secret across the truncation point is redacted whole, never split into two unredacted halves', () => {
    for (const offset of [-20, -7, -1, 0, 1, 7, 19]) {
      const buffer = new HeadTailBuffer(1_000, [KEY_SECRET]);
      // The head keeps 400 characters: put the secret across that cut.
      buffer.push(
        Buffer.from(`${'a'.repeat(400 + offset - Math.floor(KEY_SECRET.length / 2))}${KEY_SECRET}${'b'.repeat(5_000)}`),
      );
      const result = buffer.finish();
      expect(result.truncated).toBe(true);
      expect(leakedPieces(result.text)).toEqual([]);
      expect(result.redactions).toBe(1);
      expect(result.text).toContain('[REDACTED secret]');
    }
    // Control: truncating first and redacting after leaves both halves in clear.
    const text = `${'a'.repeat(400 - 10)}${KEY_SECRET}${'b'.repeat(5_000)}`;
    const cutFirst = `${text.slice(0, 400)}\n[… cut …]\n${text.slice(-600)}`;
    expect(leakedPieces(redactSecrets(cutFirst, [KEY_SECRET]).text).length).toBeGreaterThan(0);
  });

  test('a secret across the tail cut is redacted whole too', () => {
    const buffer = new HeadTailBuffer(1_000, [KEY_SECRET]);
    buffer.push(Buffer.from(`${'a'.repeat(5_000)}${KEY_SECRET}${'b'.repeat(600 - 10)}`));
    const result = buffer.finish();
    expect(leakedPieces(result.text)).toEqual([]);
    expect(result.text).toContain('[REDACTED secret]');
  });
});
