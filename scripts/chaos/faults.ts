/**
 * The chaos run's faults, each injected at a random moment and followed by its recovery (a restart, the
 * database back, the provider healthy again) before the next one, so that every fault is one an operator
 * would meet and the run measures what the product does with it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster } from '../cluster/topology';
import type { ChaosModel, ProviderFault } from './provider';

export const FAULT_KINDS = [
  'worker-kill',
  'api-kill',
  'temporal-history-matching',
  'temporal-server',
  'database-stop',
  'provider',
  'rolling-deploy',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** The product's PostgreSQL stays down for a random time in this range. */
export const DATABASE_DOWN_MS = { min: 10_000, max: 30_000 };
/** How long the provider misbehaves; a stall window as long as the stalls on a long run. */
const PROVIDER_FAULT_MS = { short: 15_000, stall: 60_000 };
/** Between two faults the cluster runs clean for at least this long. */
export const QUIET_BETWEEN_FAULTS_MS = { min: 5_000, max: 20_000 };
const PROVIDER_FAULTS: ProviderFault[] = ['rate-limited', 'overloaded', 'reset', 'stall'];

export interface FaultRecord {
  kind: FaultKind;
  detail: string;
  atMs: number;
  /** From the fault to the recovery being complete (the process answering again, the database back). */
  recoveryMs: number;
  /** The fault was injected but the cluster did not come back from it in time. */
  failed?: boolean;
}

/** A small seeded generator, so that a run's fault sequence can be replayed with `--seed`. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

export interface FaultContext {
  cluster: Cluster;
  model: ChaosModel;
  random: () => number;
  /** Long runs get the 60 s provider stalls; short ones a shorter window, to leave time for the rest. */
  longRun: boolean;
  previousReleaseVersion?: string;
  log: (line: string) => void;
}

export async function injectFault(kind: FaultKind, ctx: FaultContext, startedAt: number): Promise<FaultRecord> {
  const t0 = Date.now();
  const record = (detail: string): FaultRecord => ({ kind, detail, atMs: t0 - startedAt, recoveryMs: Date.now() - t0 });
  const { cluster, random } = ctx;
  switch (kind) {
    case 'worker-kill': {
      const index = Math.floor(random() * cluster.workers.length);
      await cluster.workers[index]!.kill();
      await cluster.restartWorker(index);
      return record(`SIGKILL worker-${index + 1}, started again`);
    }
    case 'api-kill': {
      const index = Math.floor(random() * cluster.apis.length);
      await cluster.apis[index]!.kill();
      await cluster.restartApi(index);
      return record(`SIGKILL api-${index + 1} with SSE clients attached, started again`);
    }
    case 'temporal-history-matching':
      await cluster.restartTemporal(['history', 'matching']);
      return record('restarted Temporal history and matching');
    case 'temporal-server':
      await cluster.restartTemporal(['frontend', 'history', 'matching', 'worker']);
      return record('restarted every Temporal service');
    case 'database-stop': {
      const downMs = DATABASE_DOWN_MS.min + Math.floor(random() * (DATABASE_DOWN_MS.max - DATABASE_DOWN_MS.min));
      await cluster.stopProductDatabase();
      await sleep(downMs);
      await cluster.startProductDatabase();
      return record(`product PostgreSQL stopped (immediate) for ${Math.round(downMs / 1000)} s`);
    }
    case 'provider': {
      const fault = PROVIDER_FAULTS[Math.floor(random() * PROVIDER_FAULTS.length)]!;
      const windowMs = fault === 'stall' && ctx.longRun ? PROVIDER_FAULT_MS.stall : PROVIDER_FAULT_MS.short;
      ctx.model.fail(fault, Date.now() + windowMs);
      await sleep(windowMs);
      return record(`provider ${fault} for ${Math.round(windowMs / 1000)} s`);
    }
    case 'rolling-deploy': {
      const previous = cluster.previousWorker;
      if (!previous || previous.child.exitCode !== null) return record('skipped: no previous release worker running');
      // The previous release's worker has polled beside the current ones since the start; the deploy ends:
      // it drains (SIGTERM) and a current worker is replaced too, while tasks run.
      const sideBySideMs = Date.now() - previous.startedAt;
      await previous.stop();
      await cluster.workers[0]!.stop();
      await cluster.restartWorker(0);
      return record(
        `worker ${ctx.previousReleaseVersion} drained after ${Math.round(sideBySideMs / 1000)} s beside the current release; worker-1 replaced`,
      );
    }
  }
}

/**
 * The previous release's code, for the rolling deploy: the newest commit whose subject starts with
 * "Release " and whose package.json version differs from this tree's, exported with `git archive` and
 * given this tree's node_modules (a release adds dependencies; it does not remove the previous one's).
 */
export function checkOutPreviousRelease(
  root: string,
  currentVersion: string,
): { root: string; version: string } | undefined {
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', root, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 });
  let commits: string[];
  try {
    commits = git('log', '--format=%H', '--grep=^Release ').split('\n').filter(Boolean);
  } catch {
    return undefined;
  }
  for (const commit of commits) {
    const version = (JSON.parse(git('show', `${commit}:package.json`)) as { version: string }).version;
    if (version === currentVersion) continue;
    const dir = mkdtempSync(path.join(os.tmpdir(), `da-release-${version}-`));
    execFileSync('bash', ['-c', `git -C "${root}" archive ${commit} | tar -x -C "${dir}"`]);
    symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
    return { root: dir, version };
  }
  return undefined;
}
