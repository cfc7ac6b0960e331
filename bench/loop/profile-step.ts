/**
 * `tsx bench/loop/profile-step.ts [calls]`: runs the fused step in process (no Temporal) against the
 * fake provider and prints the mean time, the number of database queries and the process's CPU time per call, for profiling
 * the step (PROFILE_CPU=<file>). PROFILE_SQL=1 also prints the statements of the 11th call (when each ended, ms into the step, and its duration).
 * PROFILE_TASKS=<n> runs n tasks of `calls` calls one after another (the bench's tasks have 21). Needs DATABASE_URL.
 */
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { mkdtempSync, writeFileSync, realpathSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from '../../schema/database';
import { LlmRouter } from '../../activities/llm/router';
import { createProvider } from '../../activities/llm/providers';
import { upsertAgent } from '../../activities/store/agents';
import { migrateToLatest } from '../../schema/migrate';
import { runStepWithTools } from '../../activities/step/with-tools';
import { startFakeLlmServer } from '../../test/fake-llm';
import { insertBenchTask, ScriptedTasks } from './scenario';
import { preparingPool } from '../../activities/store/prepared-statements';

async function main(): Promise<void> {
  // Its agents' workspaces lie in the OS temp folder: an allowed root for this run (and its workers).
  process.env.AGENTS_WORKSPACE_ALLOWED_ROOTS ??= realpathSync(os.tmpdir());
  const calls = Number(process.argv[2] ?? 41);
  let statements: string[] = [];
  let stepStart = 0;
  const db = new Kysely<Database>({
    // As the worker opens it (activities/store/db.ts): hot statements prepared, unless DATABASE_PREPARED_STATEMENTS=off.
    dialect: new PostgresDialect({
      pool:
        process.env.DATABASE_PREPARED_STATEMENTS === 'off'
          ? new pg.Pool({ connectionString: process.env.DATABASE_URL!, max: 10 })
          : preparingPool(new pg.Pool({ connectionString: process.env.DATABASE_URL!, max: 10 })),
    }),
    // Each statement with the time it ended (ms into the step) and its duration.
    log: (event) =>
      void statements.push(
        `${(performance.now() - stepStart).toFixed(1)} +${event.queryDurationMillis.toFixed(1)} ${event.query.sql.replace(/\s+/g, ' ').slice(0, 120)}`,
      ),
  });
  await migrateToLatest(db);
  const fake = await startFakeLlmServer();
  const scripts = new ScriptedTasks(fake);
  const router = LlmRouter.fromConfig(
    [{ name: 'anthropic', kind: 'anthropic', apiKey: 'bench', baseURL: fake.url }],
    createProvider,
  );
  const agentId = `bench-prof-${randomUUID().slice(0, 8)}`;
  await upsertAgent(db, {
    id: agentId,
    name: 'Profile agent',
    files: { soul: 'Careful.', agents: 'Use tools.', heartbeat: '', tools: '' },
    config: {},
    workspaceDir: mkdtempSync(`${os.tmpdir()}/da-prof-`),
  });
  // PROFILE_TASKS=<n>: n tasks of `calls` calls each, one after another (the bench's tasks have 21 calls).
  const tasks = Number(process.env.PROFILE_TASKS ?? 1);
  const times: number[] = [];
  const cpu: number[] = [];
  const queries: number[] = [];
  let middle: string[] = [];
  // PROFILE_CPU=<file>: a V8 CPU profile of the calls after the first 5 (startup and warm-up left out).
  const inspector = process.env.PROFILE_CPU ? new Session() : undefined;
  inspector?.connect();
  for (let t = 0; t < tasks; t += 1) {
    const taskId = randomUUID();
    await insertBenchTask(db, { id: taskId, agentId, description: 'Write it.' });
    scripts.add(taskId, { calls, answerMs: 0 });
    for (let turn = 0; turn < calls; turn += 1) {
      if (t === 0 && turn === 5 && inspector) {
        await inspector.post('Profiler.enable');
        // 100 µs between samples (V8's default is 1 ms): a step is about 15 ms.
        await inspector.post('Profiler.setSamplingInterval', { interval: 100 });
        await inspector.post('Profiler.start');
      }
      statements = [];
      const t0 = performance.now();
      stepStart = t0;
      const c0 = process.cpuUsage();
      await runStepWithTools(db, router, {
        agentId,
        taskId,
        sessionId: `prof_${taskId}`,
        scenario: 'task',
        attempt: 1,
        turn,
        ...(turn === 0 ? { opening: {} } : {}),
      });
      times.push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      cpu.push((c.user + c.system) / 1_000);
      queries.push(statements.length);
      if (t === 0 && turn === 10) middle = statements;
    }
  }
  if (inspector)
    writeFileSync(process.env.PROFILE_CPU!, JSON.stringify((await inspector.post('Profiler.stop')).profile));
  const warm = times.slice(5).sort((a, b) => a - b);
  const warmQueries = queries.slice(5, -1);
  const warmCpu = cpu.slice(5, -1);
  process.stdout.write(
    `calls ${calls}; first ${times[0]!.toFixed(1)} ms; median (after 5) ${warm[Math.floor(warm.length / 2)]!.toFixed(1)} ms; mean ${(warm.reduce((a, b) => a + b, 0) / warm.length).toFixed(1)} ms; ` +
      `queries per call (after 5, without the last) ${(warmQueries.reduce((a, b) => a + b, 0) / warmQueries.length).toFixed(1)}; ` +
      `this process's CPU per call ${(warmCpu.reduce((a, b) => a + b, 0) / warmCpu.length).toFixed(1)} ms\n`,
  );
  if (process.env.PROFILE_SQL) process.stdout.write(`${middle.join('\n')}\n`);
  await fake.close();
  await db.destroy();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
