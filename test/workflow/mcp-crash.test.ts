import type { ChildProcess } from 'node:child_process';
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { createHarness, submitTurn, toolTurn, type Harness } from '../support/harness';
import { eventually } from '../support/eventually';
import { killWorkerProcess, spawnWorkerProcess } from '../support/spawn-worker';
import { lastToolResults, ScriptedAgents } from './task-support';

const NODE = realpathSync(process.execPath);
const NODE_MODULES = path.resolve('node_modules');
const EVERYTHING = path.join(NODE_MODULES, '@modelcontextprotocol/server-everything/dist/index.js');
const everything = { command: NODE, args: [EVERYTHING, 'stdio'], sandbox: { readOnlyPaths: [NODE_MODULES] } };
const LONG_CALL = toolTurn('mcp__everything__trigger-long-running-operation', { duration: 4, steps: 8 });

/**
 * A worker SIGKILLed while an MCP call runs: the next worker finds the ledger's `started` row. A tool
 * the server marks idempotent runs again; one the operator marks not idempotent is reported to the
 * model as interrupted and never runs a second time.
 */
describe('a worker SIGKILLed during an MCP call', () => {
  let h: Harness;
  let agents: ScriptedAgents;
  const workers: ChildProcess[] = [];
  beforeAll(async () => {
    h = await createHarness();
    agents = new ScriptedAgents(h.llm);
  });
  afterAll(async () => {
    for (const w of workers) await killWorkerProcess(w);
    await h.close();
  });

  async function killMidCall(
    config: Record<string, unknown>,
  ): Promise<{ taskId: string; ledger: { executions: number; status: string } }> {
    const agentId = await h.createAgent({
      permissions: { canCallExternalTools: true },
      mcpServers: { everything: config },
    });
    const taskId = agents.task([LONG_CALL, submitTurn('after the crash')]);
    workers.push(await spawnWorkerProcess({ taskQueue: h.taskQueue, fakeLlmUrl: h.llm.url }));
    await h.client.startTask({ agentId, taskId, title: 'Long call', description: 'run the long operation' });
    await eventually(
      async () => {
        const progress = await h.db.db
          .selectFrom('task_events')
          .select('type')
          .where('task_id', '=', taskId)
          .where('type', '=', 'tool-progress')
          .execute();
        return progress.length >= 1;
      },
      'progress from the running call',
      30_000,
    );
    await killWorkerProcess(workers.at(-1)!);
    workers.push(await spawnWorkerProcess({ taskQueue: h.taskQueue, fakeLlmUrl: h.llm.url }));
    await h.waitForStatus(taskId, (s) => s.state === 'review', 90_000);
    const ledger = await h.db.db
      .selectFrom('tool_calls')
      .select(['executions', 'status'])
      .where('task_id', '=', taskId)
      .where('tool', '=', 'mcp__everything__trigger-long-running-operation')
      .executeTakeFirstOrThrow();
    await killWorkerProcess(workers.at(-1)!);
    return { taskId, ledger };
  }

  test('a tool the operator marks not idempotent is reported as interrupted and not run again', async () => {
    const { taskId, ledger } = await killMidCall({
      ...everything,
      tools: { 'trigger-long-running-operation': { idempotent: false } },
    });
    expect(ledger.executions).toBe(1);
    const [result] = lastToolResults(agents.requests(taskId).at(-1)!);
    expect(result!.isError).toBe(true);
    expect(result!.text).toMatch(/was interrupted: it began, but its result was never stored.*NOT run again/);
  }, 150_000);

  test('a tool the server annotates idempotentHint runs again and its result reaches the model', async () => {
    const { taskId, ledger } = await killMidCall(everything);
    expect(ledger.executions).toBe(2);
    const [result] = lastToolResults(agents.requests(taskId).at(-1)!);
    expect(result).toEqual({
      text: 'Long running operation completed. Duration: 4 seconds, Steps: 8.',
      isError: false,
    });
  }, 150_000);
});
