import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { mkdtempSync } from 'node:fs';
import { sql } from 'kysely';
import { openDatabase, type DatabaseHandle } from '../../activities/store/db';
import { findAgent, upsertAgent } from '../../activities/store/agents';
import { addTaskEvent } from '../../activities/store/tasks';
import { loadPromptInputs, promptRowsStatement } from '../../activities/step/prompt';

/**
 * The prompt's recent activity and recent runs are read per agent from their own indexes, so their
 * cost does not grow with what other agents have written (it grew with every agent's events before).
 */
describe("the prompt's recent activity and runs", () => {
  let handle: DatabaseHandle;
  beforeAll(async () => {
    handle = await openDatabase({ url: process.env.DATABASE_URL!, migrate: true, poolSize: 2 });
  });
  afterAll(async () => handle.close());

  async function agentWithTasks(label: string, tasks: number): Promise<{ agentId: string; taskIds: string[] }> {
    // Named as the harness names agents, so that tests listing known agents by id see the same shape.
    const agentId = `agent-${randomUUID().slice(0, 8)}`;
    await upsertAgent(handle.db, {
      id: agentId,
      name: `Agent ${label}`,
      files: { soul: 'Careful.', agents: '', heartbeat: '', tools: '' },
      config: {},
      workspaceDir: mkdtempSync(`${os.tmpdir()}/da-activity-`),
    });
    const taskIds: string[] = [];
    for (let i = 0; i < tasks; i++) {
      const id = randomUUID();
      await handle.db
        .insertInto('tasks')
        .values({
          id,
          agent_id: agentId,
          title: `${label} task ${i}`,
          description: '',
          state: i % 2 ? 'completed' : 'pending',
          priority: 'medium',
        })
        .execute();
      taskIds.push(id);
    }
    return { agentId, taskIds };
  }

  test('each event is stamped with its task agent, and the prompt shows only its own agent, newest last', async () => {
    const mine = await agentWithTasks('mine', 3);
    const other = await agentWithTasks('other', 2);
    await addTaskEvent(handle.db, mine.taskIds[0]!, 'task-created');
    await addTaskEvent(handle.db, other.taskIds[0]!, 'task-created');
    await addTaskEvent(handle.db, mine.taskIds[1]!, 'state-changed', { to: 'completed' });
    // Not a lifecycle event: never shown as activity.
    await addTaskEvent(handle.db, mine.taskIds[1]!, 'llm-call-finished');
    await addTaskEvent(handle.db, other.taskIds[1]!, 'note-added');

    const stamped = await handle.db
      .selectFrom('task_events')
      .select(['task_id', 'agent_id'])
      .where('task_id', 'in', [...mine.taskIds, ...other.taskIds])
      .execute();
    expect(stamped).toHaveLength(5);
    for (const row of stamped)
      expect(row.agent_id).toBe(mine.taskIds.includes(row.task_id) ? mine.agentId : other.agentId);

    const agent = (await findAgent(handle.db, mine.agentId))!;
    const inputs = await loadPromptInputs(handle.db, agent, 'task', undefined, [], new Date(), 'claude-sonnet-4-5');
    expect(inputs.recentActivity?.map((e) => [e.type, e.detail])).toEqual([
      ['task-created', 'mine task 0'],
      ['state-changed', 'mine task 1'],
    ]);
    expect(inputs.recentRuns?.map((r) => r.status)).toEqual(['completed']);
  });

  test('a prepared generic plan can read both from their partial indexes (the lists are literals)', async () => {
    const { agentId } = await agentWithTasks('plan', 1);
    const agent = (await findAgent(handle.db, agentId))!;
    let plan = '';
    await handle.db.transaction().execute(async (trx) => {
      // Tiny tables would be scanned whole anyway: forbid that, so only an index the plan may use serves them.
      await sql`set local enable_seqscan = off`.execute(trx);
      await sql`set local plan_cache_mode = force_generic_plan`.execute(trx);
      // The statement exactly as the step sends it, prepared, then its generic plan explained.
      const compiled = promptRowsStatement(trx, agent, 'task', undefined, undefined);
      const name = `activity_plan_${randomUUID().replace(/-/g, '').slice(0, 8)}`;
      await sql.raw(`prepare ${name} as ${compiled.sql}`).execute(trx);
      const args = compiled.parameters.map((p) => `'${String(p).replace(/'/g, "''")}'`).join(', ');
      const { rows } = await sql.raw<{ 'QUERY PLAN': string }>(`explain execute ${name}(${args})`).execute(trx);
      plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    });
    expect(plan).toContain('task_events_agent_activity_idx');
    expect(plan).toContain('tasks_agent_recent_runs_idx');
    expect(plan).not.toMatch(/Scan (Backward )?using task_events_pkey/);
  });
});
