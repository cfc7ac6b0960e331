import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';

/** Organisation B's objects a test aims at, and what to dump of them. */
export interface OrgFixture {
  orgB: string;
  agentB: string;
  taskIds: string[];
  sessionIds: string[];
  groupNames: string[];
  skillNames: string[];
}

/**
 * Every row of organisation B a crossing could read into or write: its tasks (all of them, by org),
 * their events, dependencies and notifications, B's agent's mailbox, sessions and their messages,
 * ledger and stored outputs, goals, memory, groups and skills, and B's agent row. Compared before and
 * after as JSON: byte-identical means nothing of B changed (no new comment, item, event or task).
 */
export async function dumpOrgRows(db: Kysely<Database>, fx: OrgFixture): Promise<string> {
  const tasks = await db.selectFrom('tasks').selectAll().where('org', '=', fx.orgB).orderBy('id').execute();
  const taskIds = [...new Set([...fx.taskIds, ...tasks.map((t) => t.id)])];
  const sessions = await db
    .selectFrom('sessions')
    .selectAll()
    .where('agent_id', '=', fx.agentB)
    .orderBy('id')
    .execute();
  const sessionIds = [...new Set([...fx.sessionIds, ...sessions.map((s) => s.id)])];
  const dump = {
    agent: await db.selectFrom('agents').selectAll().where('id', '=', fx.agentB).execute(),
    tasks,
    taskEvents: await db.selectFrom('task_events').selectAll().where('task_id', 'in', taskIds).orderBy('id').execute(),
    dependencies: await db
      .selectFrom('task_dependencies')
      .selectAll()
      .where((eb) => eb.or([eb('task_id', 'in', taskIds), eb('depends_on', 'in', taskIds)]))
      .orderBy('task_id')
      .orderBy('depends_on')
      .execute(),
    tasksUnderB: await db
      .selectFrom('tasks')
      .selectAll()
      .where((eb) => eb.or([eb('parent_task_id', 'in', taskIds), eb('budget_parent_id', 'in', taskIds)]))
      .orderBy('id')
      .execute(),
    notifications: await db
      .selectFrom('notifications')
      .selectAll()
      .where((eb) => eb.or([eb('agent_id', '=', fx.agentB), eb('task_id', 'in', taskIds)]))
      .orderBy('id')
      .execute(),
    mailbox: await db.selectFrom('mailbox_items').selectAll().where('agent_id', '=', fx.agentB).orderBy('id').execute(),
    sessions,
    messages: await db.selectFrom('messages').selectAll().where('session_id', 'in', sessionIds).orderBy('id').execute(),
    toolCalls: await db
      .selectFrom('tool_calls')
      .selectAll()
      .where('session_id', 'in', sessionIds)
      .orderBy('session_id')
      .orderBy('tool_call_id')
      .execute(),
    toolOutputs: await db
      .selectFrom('tool_outputs')
      .selectAll()
      .where('session_id', 'in', sessionIds)
      .orderBy('id')
      .execute(),
    goals: await db.selectFrom('goals').selectAll().where('agent_id', '=', fx.agentB).orderBy('id').execute(),
    observations: await db
      .selectFrom('memory_observations')
      .selectAll()
      .where('agent_id', '=', fx.agentB)
      .orderBy('id')
      .execute(),
    groups: fx.groupNames.length
      ? await db.selectFrom('group_channels').selectAll().where('name', 'in', fx.groupNames).orderBy('name').execute()
      : [],
    groupMembers: fx.groupNames.length
      ? await db
          .selectFrom('group_members')
          .selectAll()
          .where('group_name', 'in', fx.groupNames)
          .orderBy('group_name')
          .orderBy('member_id')
          .execute()
      : [],
    groupMessages: fx.groupNames.length
      ? await db
          .selectFrom('group_messages')
          .selectAll()
          .where('group_name', 'in', fx.groupNames)
          .orderBy('seq')
          .execute()
      : [],
    skillActivations: fx.skillNames.length
      ? await db.selectFrom('skill_activations').selectAll().where('name', 'in', fx.skillNames).execute()
      : [],
  };
  return JSON.stringify(dump);
}
