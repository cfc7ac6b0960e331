import { randomUUID } from 'node:crypto';
import { Context, asyncLocalStorage } from '@temporalio/activity';
import { z } from 'zod';
import { useHarness } from '../support/harness';
import { allRegisteredTools } from '../../activities/tools/registry';
import type { ToolContext, ToolOutput, ToolSpec } from '../../activities/tools/types';
import { recordNewTask } from '../../activities/store/task-graph';
import { ensureSession } from '../../activities/store/sessions';
import { saveObservation } from '../../activities/memory/store';
import { createGroup } from '../../activities/mailbox/group';
import { PLATFORM } from '../../activities/store/tenancy';
import { dumpOrgRows, type OrgFixture } from './org-walls-support';

/**
 * Organisations are walls for agents' tools, generated from the tool registry: every property of every
 * registered tool whose name says it takes an id (a task, an agent, a group, an output, a goal, a
 * memory entry, a skill) is aimed at organisation B's object by an agent of organisation A. The answer
 * must be exactly the answer for an id that was never used (so existence does not leak), and every row
 * of organisation B must be byte-identical afterwards. A new tool, or a new id argument, without a
 * fixture here fails the test: nobody has to remember to add it.
 */

/** Property names that carry an id of something another organisation may own. */
const ID_LIKE =
  /(^|_)ids?$|^(assignee|to|recipient|reply_to|depends_on|add_dependencies|agents|humans|group|name|activate)$/;

/**
 * Id-like properties that are not walled by the tool, each with the reason. Still checked: each must
 * exist in the registry (a stale entry fails), and B's rows must not change when it is used.
 */
const NOT_AN_ORG_OBJECT: Record<string, string> = {
  'edit_agent_file.name': "one of the caller's own identity files (SOUL.md …), never another agent's",
};

/**
 * Known exceptions to "the same answer as a never-used id", with the reason. The wall still holds
 * (nothing of B changes); only the wording differs from a fresh name.
 */
const GLOBAL_NAMES: Record<string, string> = {
  'agent_create_group_chat.name':
    'group names are unique across organisations (they name mailbox channels): a taken name is refused in the same words wherever it is taken',
  'agent_create_group_chat.humans':
    "human members carry no organisation here: which groups a person reads is the inbox's wall (API)",
};

describe('agent tools aimed at another organisation (generated from the tool registry)', () => {
  const h = useHarness();
  let fx: OrgFixture & {
    orgA: string;
    agentA: string;
    colleagueA: string;
    taskA: string;
    sessionA: string;
    taskB: string;
    outputB: string;
    goalB: string;
    observationB: string;
    groupB: string;
    mailboxB: string;
    skillB: string;
  };

  beforeAll(async () => {
    const suffix = randomUUID().slice(0, 8);
    const orgA = `walls-a-${suffix}`;
    const orgB = `walls-b-${suffix}`;
    const agentA = await h.createAgent({ org: orgA });
    const colleagueA = await h.createAgent({ org: orgA });
    const agentB = await h.createAgent({ org: orgB });
    const db = h.db.db;
    const task = (id: string, agentId: string) =>
      recordNewTask(db, {
        id,
        agentId,
        title: `task of ${agentId}`,
        description: 'secret brief of the other organisation',
        priority: 'medium',
        createdBy: 'user:test',
        org: PLATFORM,
      });
    const taskB = `task-b-${suffix}`;
    const taskA = `task-a-${suffix}`;
    await task(taskB, agentB);
    await task(taskA, agentA);
    const sessionA = `session-a-${suffix}`;
    const sessionB = `session-b-${suffix}`;
    await ensureSession(db, { id: sessionA, agentId: agentA, kind: 'task', taskId: taskA });
    await ensureSession(db, { id: sessionB, agentId: agentB, kind: 'task', taskId: taskB });
    const outputB = `out-b-${suffix}`;
    await db
      .insertInto('tool_outputs')
      .values({ id: outputB, session_id: sessionB, tool_call_id: 'call-b', content: 'B output', chars: 8 })
      .execute();
    const goalB = `goal_b${suffix}`;
    await db
      .insertInto('goals')
      .values({ id: goalB, agent_id: agentB, title: 'B goal', criteria: 'done', status: 'active', max_iterations: 5 })
      .execute();
    const { id: observationB } = await saveObservation(db, agentB, { type: 'note', content: 'B remembers this' });
    const groupB = `walls-group-b-${suffix}`;
    await createGroup(db, { name: groupB, createdBy: 'user:test', members: [{ type: 'agent', id: agentB }] });
    const mailboxB = `item-b-${suffix}`;
    await db
      .insertInto('mailbox_items')
      .values({
        id: mailboxB,
        agent_id: agentB,
        kind: 'message',
        from_type: 'agent',
        from_id: agentA,
        channel: `dm:${agentA}:${agentB}`,
        text: 'old message',
        reply_to: null,
        thread_id: mailboxB,
        task_id: null,
        priority: 1,
        status: 'completed',
        decision: 'respond',
        merged_into: null,
      })
      .execute();
    const skillB = `walls-skill-b-${suffix}`;
    await db
      .insertInto('skills')
      .values({
        scope: `org:${orgB}`,
        name: skillB,
        description: 'B only',
        body: 'B only',
        owner_agent_id: null,
        content_hash: 'x',
      })
      .execute();
    fx = {
      orgA,
      orgB,
      agentA,
      colleagueA,
      agentB,
      taskA,
      sessionA,
      taskIds: [taskB],
      sessionIds: [sessionB],
      groupNames: [groupB],
      skillNames: [skillB],
      taskB,
      outputB,
      goalB,
      observationB,
      groupB,
      mailboxB,
      skillB,
    };
  });

  /**
   * For each (tool, property): the arguments that aim that property at `target`. `b` is organisation
   * B's object; the test calls again with a never-used value and compares the answers.
   */
  type Aim = { b: () => string; args: (target: string) => Record<string, unknown> };
  const fixtures = (): Record<string, Aim> => ({
    'task_create.assignee': { b: () => fx.agentB, args: (t) => ({ title: 'launder', assignee: t }) },
    'task_create.parent_task_id': { b: () => fx.taskB, args: (t) => ({ title: 'under B', parent_task_id: t }) },
    'task_create.depends_on': { b: () => fx.taskB, args: (t) => ({ title: 'after B', depends_on: [t] }) },
    'task_list.parent_task_id': { b: () => fx.taskB, args: (t) => ({ scope: 'all', parent_task_id: t }) },
    'task_get.task_id': { b: () => fx.taskB, args: (t) => ({ task_id: t }) },
    'task_update.task_id': { b: () => fx.taskB, args: (t) => ({ task_id: t, title: 'hijacked' }) },
    'task_update.add_dependencies': { b: () => fx.taskB, args: (t) => ({ task_id: fx.taskA, add_dependencies: [t] }) },
    'task_comment.task_id': { b: () => fx.taskB, args: (t) => ({ task_id: t, text: 'hello B' }) },
    'notify_user.related_task_id': { b: () => fx.taskB, args: (t) => ({ message: 'about B', related_task_id: t }) },
    'agent_send_message.to': { b: () => fx.agentB, args: (t) => ({ to: t, text: 'hello B' }) },
    'agent_send_message.reply_to': {
      b: () => fx.mailboxB,
      args: (t) => ({ to: fx.colleagueA, text: 'hello', reply_to: t }),
    },
    'agent_send_group_message.group': { b: () => fx.groupB, args: (t) => ({ group: t, text: 'hello B' }) },
    'agent_create_group_chat.agents': {
      b: () => fx.agentB,
      args: (t) => ({ name: `walls-new-${randomUUID().slice(0, 8)}`, agents: [t] }),
    },
    'agent_create_group_chat.name': {
      b: () => fx.groupB,
      args: (t) => ({ name: t, agents: [fx.colleagueA] }),
    },
    'agent_create_group_chat.humans': {
      b: () => 'someone-of-b',
      args: (t) => ({ name: `walls-h-${randomUUID().slice(0, 8)}`, agents: [fx.colleagueA], humans: [t] }),
    },
    'read_tool_output.id': { b: () => fx.outputB, args: (t) => ({ id: t }) },
    'goal_update.goal_id': { b: () => fx.goalB, args: (t) => ({ goal_id: t, status: 'paused' }) },
    'memory_update.ids': { b: () => fx.observationB, args: (t) => ({ mode: 'delete', ids: [t] }) },
    'memory_delete.ids': { b: () => fx.observationB, args: (t) => ({ ids: [t] }) },
    'memory_update_longterm.ids': { b: () => fx.observationB, args: (t) => ({ mode: 'delete', ids: [t] }) },
    'edit_agent_file.agent_id': { b: () => fx.agentB, args: (t) => ({ name: 'SOUL.md', body: 'x', agent_id: t }) },
    'discover_tools.activate': { b: () => fx.skillB, args: (t) => ({ query: t, activate: [t] }) },
    'edit_agent_file.name': { b: () => 'SOUL.md', args: (t) => ({ name: t, body: 'x' }) },
  });

  let call = 0;
  const context = (): ToolContext => ({
    db: h.db.db,
    agentId: fx.agentA,
    org: fx.orgA,
    sessionId: fx.sessionA,
    toolCallId: `matrix-${++call}`,
    workspaceDir: h.workspaceDir,
    signal: new AbortController().signal,
    agentConfig: {},
    heartbeat: () => undefined,
  });

  /** Runs a tool as the worker's activity would: with an activity context whose client is the real one. */
  async function run(spec: ToolSpec, args: Record<string, unknown>): Promise<ToolOutput> {
    const parsed = spec.schema.parse(args);
    const controller = new AbortController();
    const activity = new (Context as unknown as new (...a: unknown[]) => Context)(
      { taskQueue: h.taskQueue, activityId: 'matrix', activityType: 'executeTool', attempt: 1 },
      new Promise(() => undefined),
      controller.signal,
      () => undefined,
      h.temporal,
      console,
      undefined,
      undefined,
    );
    return asyncLocalStorage.run(activity, () => spec.run(parsed, context()));
  }

  /** Every id-like property of every registered tool, as `tool.property`. */
  function idArguments(): string[] {
    const found: string[] = [];
    for (const [name, spec] of allRegisteredTools()) {
      const schema = spec.inputJsonSchema ?? (z.toJSONSchema(spec.schema) as Record<string, unknown>);
      const properties = (schema.properties ?? {}) as Record<string, unknown>;
      for (const property of Object.keys(properties)) if (ID_LIKE.test(property)) found.push(`${name}.${property}`);
    }
    return found.sort();
  }

  test('every id argument of every tool has a fixture (a new one fails here until it gets one)', () => {
    const args = idArguments();
    const missing = args.filter((a) => !(a in fixtures()));
    expect(missing).toEqual([]);
    // No stale fixture or exception either: each names an argument the registry still has.
    expect(Object.keys(fixtures()).filter((f) => !args.includes(f))).toEqual([]);
    expect([...Object.keys(NOT_AN_ORG_OBJECT), ...Object.keys(GLOBAL_NAMES)].filter((f) => !args.includes(f))).toEqual(
      [],
    );
    // The matrix is not trivially small: the task, message, group, output, goal, memory and skill tools.
    expect(args.length).toBeGreaterThanOrEqual(20);
  });

  test("aimed at organisation B's object, each answers as for a never-used id and changes nothing of B", async () => {
    const before = await dumpOrgRows(h.db.db, fx);
    const tools = allRegisteredTools();
    const report: string[] = [];
    for (const key of idArguments()) {
      const [toolName] = key.split('.') as [string, string];
      const aim = fixtures()[key]!;
      const spec = tools.get(toolName)!;
      if (key in NOT_AN_ORG_OBJECT) continue;
      const target = aim.b();
      const onB = await run(spec, aim.args(target));
      if (key in GLOBAL_NAMES) {
        report.push(`${key}: ${onB.content}`);
        continue;
      }
      const neverUsed = `never-used-${randomUUID().slice(0, 8)}`;
      const onNothing = await run(spec, aim.args(neverUsed));
      const plain = (o: ToolOutput, id: string) => ({
        content: o.content.split(id).join('<id>'),
        isError: !!o.isError,
      });
      expect({ key, ...plain(onB, target) }).toEqual({ key, ...plain(onNothing, neverUsed) });
      report.push(`${key}: ${onB.content.slice(0, 120)}`);
    }
    if (process.env.WALLS_REPORT) console.log(report.join('\n'));
    expect(report.find((r) => r.startsWith('agent_create_group_chat.name'))).toMatch(/is taken; choose another/);
    // Every row of organisation B is byte-identical: nothing was read into A's state, nothing written to B.
    expect(await dumpOrgRows(h.db.db, fx)).toEqual(before);
  });
});
