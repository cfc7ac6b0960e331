/**
 * A bounded chaos run on the reference cluster (`npm run cluster`'s topology): load through the API
 * processes, faults at random moments, then the invariants checked from the database, the workspaces and
 * Temporal's histories, printed as a table.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { openDatabase } from '../../activities/store/db';
import { createToken } from '../../api/tokens';
import { AgentsClient } from '../../client';
import { AgentSchedules } from '../../client/schedules';
import { startFakeLlmServer } from '../../test/fake-llm';
import { CHAT_LLM } from '../../workflows/activity-options';
import { MIN_HEARTBEAT_INTERVAL_MS } from '../../workflows/rules/heartbeat-rules';
import { freeBasePort, startCluster } from '../cluster/topology';
import {
  checkOutPreviousRelease,
  FAULT_KINDS,
  injectFault,
  QUIET_BETWEEN_FAULTS_MS,
  seededRandom,
  type FaultKind,
  type FaultRecord,
} from './faults';
import { checkInvariants, type Invariant } from './invariants';
import { ApiClients, followChat, runApprover, startTask, type FollowedChat, type StartedTask } from './load';
import { chaosModel, providerStallCutMs } from './provider';

const ROOT = path.resolve(__dirname, '..', '..');
/** A new task every this often, and a chat message every CHAT_EVERY_MS, while the load runs. */
const TASK_EVERY_MS = 2_000;
const CHAT_EVERY_MS = 6_000;
/** After the load stops, tasks still running get this long to reach review (a stalled provider call included). */
const DRAIN_MS = 6 * 60_000;
/** A stalled provider stream is cut after this long (`providerStallCutMs`). */
const PROVIDER_HANG_CUT_MS = providerStallCutMs();
/** Between two attempts of a chat's model call, at most (CHAT_LLM's maximum retry interval). */
const CHAT_RETRY_GAP_MS = 30_000;
/** On top of the attempts: a worker kill (20 s heartbeat timeout), a database stop, the backlog. */
const CHAT_ANSWER_SLACK_MS = 5 * 60_000;
/**
 * A follower waits for its answer as long as the product may take to answer or give up: every attempt
 * of the chat's model call hung until it is cut. After the last one the agent drops the item and the
 * follower gets an `end` naming the error. How long the answers took is reported beside the invariant.
 */
const CHAT_FOLLOW_MS =
  (CHAT_LLM.retry?.maximumAttempts ?? 1) * (PROVIDER_HANG_CUT_MS + CHAT_RETRY_GAP_MS) + CHAT_ANSWER_SLACK_MS;
const RSS_SAMPLE_MS = 5_000;
/** Schedules are created this many at a time (each waits for the server to show it). */
const SCHEDULE_CONCURRENCY = 8;
/** A run this long or longer gets the issue's full 60 s provider stalls. */
const LONG_RUN_MINUTES = 10;

export interface ChaosOptions {
  minutes: number;
  agents: number;
  seed: number;
  dir: string;
  log: (line: string) => void;
}

export interface ChaosReport {
  options: ChaosOptions;
  invariants: Invariant[];
  faults: FaultRecord[];
  tasks: number;
  chats: number;
  approvals: { decided: number; refused: number };
  providerFaults: Record<string, number>;
  /** Provider streams that stalled: how long each stayed open before its client cut it, and those never cut. */
  stalls: { cutAfterMs: number[]; neverCut: number; idleCutMs: number };
  llmRequests: number;
  apiRetries: number;
  wallMs: number;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const { log } = options;
  const t0 = Date.now();
  const model = chaosModel();
  const previousRelease = checkOutPreviousRelease(
    ROOT,
    (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version,
  );
  if (previousRelease)
    log(
      `the previous release, ${previousRelease.version}, runs a worker beside the current ones until the rolling deploy`,
    );
  const llm = await startFakeLlmServer({ responder: (request) => model.respond(request) });
  const cluster = await startCluster({
    dir: options.dir,
    basePort: await freeBasePort(),
    log,
    productEnv: {
      ANTHROPIC_API_KEY: 'chaos-fake-key',
      ANTHROPIC_BASE_URL: llm.url,
      OPENAI_API_KEY: '',
      OPENAI_COMPATIBLE_BASE_URL: '',
    },
    ...(previousRelease ? { previousRelease } : {}),
  });
  const db = await openDatabase({ url: cluster.productDatabaseUrl, poolSize: 4 });
  const connection = await Connection.connect({ address: cluster.temporalAddress });
  const temporal = new Client({ connection });
  const rssSamplesMb = new Map<string, number[]>();
  const sampler = setInterval(() => sampleRss(cluster.workers, rssSamplesMb), RSS_SAMPLE_MS);
  try {
    const agents = new AgentsClient(temporal, db.db, { workspaceRoot: path.join(options.dir, 'workspaces') });
    const workspaces = new Map<string, string>();
    const agentIds = Array.from({ length: options.agents }, (_, i) => `chaos-${i}`);
    for (const id of agentIds)
      workspaces.set(
        id,
        (await agents.upsertAgentFromFolder(path.join(ROOT, 'examples/agents/scribe'), { id })).workspaceDir,
      );
    log(
      `${agentIds.length} agents; creating their heartbeat schedules (every ${MIN_HEARTBEAT_INTERVAL_MS / 60_000} min)`,
    );
    const schedules = new AgentSchedules(temporal);
    for (let i = 0; i < agentIds.length; i += SCHEDULE_CONCURRENCY) {
      await Promise.all(
        agentIds
          .slice(i, i + SCHEDULE_CONCURRENCY)
          .map((id) => schedules.createHeartbeat(id, { intervalMs: MIN_HEARTBEAT_INTERVAL_MS })),
      );
    }
    const api = new ApiClients(cluster.apiUrls, (await createToken(db.db, 'chaos', 'operator')).token);
    const loadEnds = Date.now() + options.minutes * 60_000;
    const stopApprover = new AbortController();
    const approver = runApprover(api, stopApprover.signal);
    const tasks: StartedTask[] = [];
    const chats: Array<Promise<FollowedChat>> = [];
    const busy = new Set<string>();
    const random = seededRandom(options.seed);
    const faults: FaultRecord[] = [];
    const faultLoop = (async () => {
      // Every kind once in a shuffled order, then again: a short run still meets each fault.
      let order: FaultKind[] = [];
      while (Date.now() < loadEnds) {
        await sleep(
          QUIET_BETWEEN_FAULTS_MS.min + random() * (QUIET_BETWEEN_FAULTS_MS.max - QUIET_BETWEEN_FAULTS_MS.min),
        );
        if (Date.now() >= loadEnds) break;
        if (order.length === 0) order = shuffle([...FAULT_KINDS], random);
        const kind = order.shift()!;
        log(`fault: ${kind}`);
        const at = Date.now();
        try {
          const fault = await injectFault(
            kind,
            {
              cluster,
              model,
              random,
              longRun: options.minutes >= LONG_RUN_MINUTES,
              previousReleaseVersion: previousRelease?.version,
              log,
            },
            t0,
          );
          log(`  ${fault.detail} (recovered in ${(fault.recoveryMs / 1000).toFixed(1)} s)`);
          faults.push(fault);
        } catch (error) {
          // A recovery that did not happen is a finding, not the end of the run: the invariants say so.
          log(`  ${kind} did not recover: ${(error as Error).message.split('\n')[0]}`);
          faults.push({
            kind,
            detail: `did not recover: ${(error as Error).message.split('\n')[0]}`,
            atMs: at - t0,
            recoveryMs: Date.now() - at,
            failed: true,
          });
        }
      }
    })();
    let n = 0;
    let lastChat = 0;
    while (Date.now() < loadEnds) {
      await refreshBusy(db.db, tasks, busy);
      const agentId =
        agentIds.find((id, i) => !busy.has(id) && i >= n % agentIds.length) ?? agentIds.find((id) => !busy.has(id));
      if (agentId) {
        try {
          tasks.push(await startTask(api, agentId, n++));
          busy.add(agentId);
        } catch (error) {
          log(`a task start failed for good: ${(error as Error).message}`);
        }
      }
      if (Date.now() - lastChat >= CHAT_EVERY_MS) {
        lastChat = Date.now();
        chats.push(followChat(api, agentIds[chats.length % agentIds.length]!, String(chats.length), CHAT_FOLLOW_MS));
      }
      await sleep(TASK_EVERY_MS);
    }
    await faultLoop;
    log(
      `load stopped after ${options.minutes} min: ${tasks.length} tasks, ${chats.length} chats, ${faults.length} faults; draining`,
    );
    const drainEnds = Date.now() + DRAIN_MS;
    while (Date.now() < drainEnds && (await refreshBusy(db.db, tasks, busy)) > 0) await sleep(2_000);
    stopApprover.abort();
    const followed = await Promise.all(chats);
    const invariants = [
      faultsRecovered(faults),
      ...(await checkInvariants({
        db: db.db,
        temporal,
        tasks,
        chats: followed,
        workspaceOf: (id) => workspaces.get(id)!,
        rssSamplesMb,
      })),
    ];
    return {
      options,
      invariants,
      faults,
      tasks: tasks.length,
      chats: followed.length,
      approvals: await approver,
      providerFaults: { ...model.faultsServed },
      stalls: {
        cutAfterMs: model.stalled
          .flatMap((r) => (r.abortedAt !== undefined ? [r.abortedAt - r.receivedAt] : []))
          .sort((a, b) => a - b),
        neverCut: model.stalled.filter((r) => r.abortedAt === undefined).length,
        idleCutMs: PROVIDER_HANG_CUT_MS,
      },
      llmRequests: llm.requests.length,
      apiRetries: api.requestsRetried,
      wallMs: Date.now() - t0,
    };
  } finally {
    clearInterval(sampler);
    await connection.close();
    await db.close();
    await cluster.stop();
    await llm.close();
  }
}

function faultsRecovered(faults: FaultRecord[]): Invariant {
  const failed = faults.filter((f) => f.failed);
  const slowest = faults.filter((f) => !f.failed).sort((a, b) => b.recoveryMs - a.recoveryMs)[0];
  return {
    name: 'every fault recovered from',
    held: failed.length === 0,
    detail: `${faults.length - failed.length}/${faults.length} recovered${slowest ? `; slowest ${slowest.kind} ${(slowest.recoveryMs / 1000).toFixed(1)} s` : ''}${failed.length ? `; ${failed.map((f) => `${f.kind}: ${f.detail}`).join('; ')}` : ''}`,
  };
}

/** Marks agents whose chaos task has not reached review yet; returns how many tasks are still running. */
async function refreshBusy(
  db: Parameters<typeof checkInvariants>[0]['db'],
  tasks: StartedTask[],
  busy: Set<string>,
): Promise<number> {
  if (tasks.length === 0) return 0;
  const open = new Set<string>();
  try {
    const rows = await db
      .selectFrom('tasks')
      .select(['id', 'state'])
      .where(
        'id',
        'in',
        tasks.map((t) => t.taskId),
      )
      .execute();
    const states = new Map(rows.map((r) => [r.id, r.state]));
    for (const task of tasks) if (states.get(task.taskId) !== 'review') open.add(task.agentId);
  } catch {
    return busy.size; // the database is down: nothing learned
  }
  busy.clear();
  for (const id of open) busy.add(id);
  return open.size;
}

function sampleRss(workers: Array<{ name: string; child: { pid?: number } }>, samples: Map<string, number[]>): void {
  for (const worker of workers) {
    try {
      const status = readFileSync(`/proc/${worker.child.pid}/status`, 'utf8');
      const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
      if (kb) samples.set(worker.name, [...(samples.get(worker.name) ?? []), Math.round(kb / 1024)]);
    } catch {
      // between a kill and its restart
    }
  }
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
