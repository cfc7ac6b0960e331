/**
 * `tsx bench/loop/profile-step.ts [calls]`: runs the fused step in process (no Temporal) against the
 * fake provider and prints the mean time per call, for profiling the step with `node --cpu-prof`.
 * Needs DATABASE_URL.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import { LlmRouter } from '../../activities/llm/router';
import { createProvider } from '../../activities/llm/providers';
import { openDatabase } from '../../activities/store/db';
import { upsertAgent } from '../../activities/store/agents';
import { runStepWithTools } from '../../activities/step-with-tools';
import { startFakeLlmServer } from '../../test/fake-llm';
import { ScriptedTasks } from './scenario';

async function main(): Promise<void> {
  const calls = Number(process.argv[2] ?? 41);
  const db = await openDatabase({ url: process.env.DATABASE_URL! });
  const fake = await startFakeLlmServer();
  const scripts = new ScriptedTasks(fake);
  const router = LlmRouter.fromConfig([{ name: 'anthropic', kind: 'anthropic', apiKey: 'bench', baseURL: fake.url }], createProvider);
  const agentId = `bench-prof-${randomUUID().slice(0, 8)}`;
  await upsertAgent(db.db, { id: agentId, name: 'Profile agent', files: { soul: 'Careful.', agents: 'Use tools.', heartbeat: '', tools: '' }, config: {}, workspaceDir: mkdtempSync(`${os.tmpdir()}/da-prof-`) });
  const taskId = randomUUID();
  await db.db.insertInto('tasks').values({ id: taskId, agent_id: agentId, title: 'Write the report', description: 'Write it.', state: 'in_progress', priority: 'medium' }).execute();
  scripts.add(taskId, { calls, answerMs: 0 });
  const times: number[] = [];
  for (let turn = 0; turn < calls; turn += 1) {
    const t0 = performance.now();
    await runStepWithTools(db.db, router, { agentId, taskId, sessionId: `prof_${taskId}`, scenario: 'task', attempt: 1, turn, ...(turn === 0 ? { opening: {} } : {}) });
    times.push(performance.now() - t0);
  }
  const warm = times.slice(5).sort((a, b) => a - b);
  process.stdout.write(`calls ${calls}; first ${times[0]!.toFixed(1)} ms; median (after 5) ${warm[Math.floor(warm.length / 2)]!.toFixed(1)} ms; mean ${(warm.reduce((a, b) => a + b, 0) / warm.length).toFixed(1)} ms\n`);
  await fake.close();
  await db.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
