import { randomUUID } from 'node:crypto';
import { agentWorkflowId, ConversationClient, DeliveryRejectedError } from '../../client/chat';
import {
  AGENT_COMMENT_DELIVERIES_PER_TASK_HOUR,
  agentCommentRoom,
  deliverAgentComment,
  deliverCommentMentions,
} from '../../activities/mailbox/mentions';
import {
  GROUP_MAX_AGENT_DEPTH,
  GROUP_TURN_AGENT_MESSAGE_BUDGET,
  GROUP_TURN_DELIVERY_BUDGET,
} from '../../workflows/rules/group';
import type { RecordedRequest, ScriptedResponse } from '../fake-llm';
import { eventually } from '../support/eventually';
import { useHarness } from '../support/harness';
import { requestMessagesText, requestSystemText, requestToolNames } from '../support/requests';

const text = (t: string): ScriptedResponse => ({
  kind: 'message',
  content: [{ type: 'text', text: t }],
  stopReason: 'end_turn',
});
const toolCall = (name: string, input: Record<string, unknown>): ScriptedResponse => ({
  kind: 'message',
  content: [{ type: 'tool_use', name, input }],
  stopReason: 'tool_use',
});
/** Tool results in the request after the last group message: how far the agent is in answering it. */
const toolResultsSinceGroupMessage = (r: RecordedRequest): number => {
  const messages = r.body.messages as unknown[];
  const last = messages.findLastIndex((m) => JSON.stringify(m).includes('[GROUP '));
  return (JSON.stringify(messages.slice(last + 1)).match(/"tool_result"/g) ?? []).length;
};
/** The agent a request is for and the group message it answers (the last one in the request). */
const lastTurn = (r: RecordedRequest): { agent: string; body: string } => {
  const last = JSON.stringify((r.body.messages as unknown[]).findLast((m) => JSON.stringify(m).includes('[GROUP ')));
  return { agent: /· you are ([A-Za-z0-9._-]+) ·/.exec(last)?.[1] ?? '?', body: last };
};

describe('group chat', () => {
  const h = useHarness({
    worker: true,
    beforeClose: async () => {
      h.llm.setResponder(undefined);
      for (const id of agents)
        await h.temporal.workflow
          .getHandle(agentWorkflowId(id))
          .terminate('test finished')
          .catch(() => undefined);
    },
  });
  let conv: ConversationClient;
  const agents: string[] = [];
  const ann = { type: 'human' as const, id: 'ann' };
  const group = `team-${Date.now()}`;
  beforeAll(async () => {
    conv = new ConversationClient(h.client, { connectionString: h.db.url });
    for (let i = 0; i < 3; i++) agents.push(await h.createAgent());
    await conv.createGroup(group, [...agents.map((id) => ({ type: 'agent' as const, id })), ann], 'ann');
  });

  const groupItems = () =>
    h.db.db
      .selectFrom('mailbox_items')
      .selectAll()
      .where('channel', '=', `group:${group}`)
      .orderBy('created_at')
      .execute();
  /** Every member agent idle and every group item handled, twice in a row half a second apart with nothing new. */
  const settled = async (what: string) => {
    let last = '';
    return eventually(
      async () => {
        const items = await groupItems();
        const idle = (await Promise.all(agents.map((a) => conv.mailbox(a).catch(() => undefined)))).every(
          (v) => !v || v.attention === 'idle',
        );
        const key = `${items.length}/${(await conv.group(group)).messages.length}/${h.llm.requests.length}`;
        const done = idle && items.every((i) => ['completed', 'merged', 'dropped'].includes(i.status)) && key === last;
        last = key;
        return done ? items : undefined;
      },
      what,
      90_000,
      500,
    );
  };

  test('3 agents and 1 human: agents that always @mention each other still stop within the turn’s budgets', async () => {
    // Every agent answers and @mentions the two others: without the group rules this never ends.
    h.llm.setResponder((r) => {
      const { agent } = lastTurn(r);
      return text(
        `${agent} agrees. ${agents
          .filter((a) => a !== agent)
          .map((a) => `@${a}`)
          .join(' ')} what do you think?`,
      );
    });
    const before = h.llm.requests.length;
    const posted = await conv.postToGroup(group, ann, 'hello team, shall we ship on Friday?');
    expect([...posted.deliveredTo].sort()).toEqual([...agents].sort());
    expect(posted.routing).toMatch(/no mention, to every member agent/);

    const items = await settled('the group conversation to converge');
    const { messages } = await conv.group(group);
    const turn = messages.filter((m) => m.turnId === posted.id);
    const agentMessages = turn.filter((m) => m.from.type === 'agent');
    const deliveries = turn.reduce((n, m) => n + m.deliveredTo.length, 0);

    // Bounded: one LLM call per delivery, at most the turn's delivery budget; at most the message budget posted.
    expect(h.llm.requests.length - before).toBe(deliveries);
    expect(deliveries).toBeLessThanOrEqual(GROUP_TURN_DELIVERY_BUDGET);
    expect(deliveries).toBeGreaterThan(agents.length); // mentions did route to the others
    expect(agentMessages).toHaveLength(GROUP_TURN_AGENT_MESSAGE_BUDGET);
    expect(items.filter((i) => i.result?.includes('agent messages are used up')).length).toBeGreaterThan(0);
    // Nobody receives their own message; an answer at the depth limit reaches no agent.
    expect(items.filter((i) => i.from_id === i.agent_id)).toEqual([]);
    for (const m of agentMessages) {
      expect(m.depth).toBeGreaterThanOrEqual(1);
      expect(m.depth).toBeLessThanOrEqual(GROUP_MAX_AGENT_DEPTH);
      expect(m.deliveredTo).not.toContain(m.from.id);
      if (m.depth === GROUP_MAX_AGENT_DEPTH) expect(m.deliveredTo).toEqual([]);
    }
    // Everyone answered in their own session for the group channel.
    for (const a of agents) {
      const sessions = await h.db.db.selectFrom('sessions').select('id').where('agent_id', '=', a).execute();
      expect(sessions.map((s) => s.id)).toEqual([`channel_group:${group}_${a}`]);
    }
  }, 120_000);

  test('a mention reaches only the mentioned agent; unmentioned agents stay silent; a plain agent answer triggers no one', async () => {
    const [first, second] = agents as [string, string, string];
    h.llm.setResponder((r) => {
      const { agent, body } = lastTurn(r);
      return body.includes('You were not mentioned') ? text('[NO_RESPONSE]') : text(`${agent}: summary done`);
    });
    const beforeItems = (await groupItems()).length;
    const beforeRequests = h.llm.requests.length;

    const mention = await conv.postToGroup(group, ann, `@${first} please summarise; no need to ask the others`);
    expect(mention.deliveredTo).toEqual([first]);
    await settled('the mentioned agent to answer');
    const afterMention = (await groupItems()).slice(beforeItems);
    expect(afterMention.map((i) => [i.agent_id, i.kind])).toEqual([[first, 'mention']]);
    const answer = (await conv.group(group)).messages.find((m) => m.replyTo === mention.id);
    expect(answer).toMatchObject({
      from: { type: 'agent', id: first },
      text: `${first}: summary done`,
      depth: 1,
      deliveredTo: [],
    });
    expect(answer!.routing).toMatch(/no mention is delivered to no agent/);
    expect(h.llm.requests.length - beforeRequests).toBe(1);

    // No mention: every agent gets it, each stays silent, nothing is posted.
    const open = await conv.postToGroup(group, ann, 'anyone around?');
    await settled('the silent round to end');
    const silent = (await groupItems()).filter((i) => i.reply_to === open.id);
    expect(silent.map((i) => i.agent_id).sort()).toEqual([...agents].sort());
    expect(silent.every((i) => i.kind === 'chat' && i.result === 'no reply: the agent stayed silent')).toBe(true);
    expect((await conv.group(group)).messages.filter((m) => m.turnId === open.id)).toHaveLength(1);
    expect(h.llm.requests.length - beforeRequests).toBe(1 + agents.length);
    void second;
    // Every group run answered in the group_chat scenario: its section and its tools, not chat's.
    for (const r of h.llm.requests.slice(beforeRequests)) {
      expect(requestSystemText(r)).toContain('### Group chat');
      expect(requestSystemText(r)).not.toContain('### Chat');
      expect(requestToolNames(r)).toEqual(
        expect.arrayContaining(['agent_send_group_message', 'agent_list_group_chats', 'notify_user']),
      );
      expect(requestToolNames(r)).not.toContain('file_write');
    }
  }, 120_000);

  test('agent_send_group_message: a post while answering continues the turn and is routed by the group rules', async () => {
    const [first, second] = agents as [string, string, string];
    const beforeRequests = h.llm.requests.length;
    h.llm.setResponder((r) => {
      const { agent, body } = lastTurn(r);
      if (agent === first && body.includes('second opinion')) {
        const done = toolResultsSinceGroupMessage(r);
        if (done === 0) return toolCall('agent_list_group_chats', {});
        if (done === 1) return toolCall('agent_send_group_message', { group, text: `@${second} what is your view?` });
        return text('I asked for a second opinion.');
      }
      if (agent === second && body.includes('what is your view')) return text(`${second}: looks fine`);
      return text('[NO_RESPONSE]');
    });
    const posted = await conv.postToGroup(group, ann, `@${first} please get a second opinion from a colleague`);
    expect(posted.deliveredTo).toEqual([first]);
    await settled('the relayed question to be answered');

    const turn = (await conv.group(group)).messages.filter((m) => m.turnId === posted.id);
    // The second agent's answer and the first agent's final answer race; their order does not matter.
    expect(turn).toHaveLength(4);
    expect(turn.map((m) => [m.from.id, m.depth, m.deliveredTo])).toEqual(
      expect.arrayContaining([
        ['ann', 0, [first]],
        [first, 1, [second]],
        [second, 2, []],
        [first, 1, []],
      ]),
    );
    const relayed = turn.find((m) => m.from.id === first && m.deliveredTo.length > 0)!;
    const answer = turn.find((m) => m.from.id === second)!;
    const final = turn.find((m) => m.from.id === first && m.deliveredTo.length === 0)!;
    expect(relayed).toMatchObject({ text: `@${second} what is your view?`, replyTo: posted.id });
    expect(relayed.routing).toMatch(/^G3: to the mentioned agents/);
    expect(answer).toMatchObject({ text: `${second}: looks fine`, replyTo: relayed.id });
    expect(answer.routing).toMatch(/no mention is delivered to no agent/);
    expect(final).toMatchObject({ text: 'I asked for a second opinion.', replyTo: posted.id });

    // The tools' answers, as the model read them in its next step.
    const firstRequests = h.llm.requests.slice(beforeRequests).filter((r) => lastTurn(r).agent === first);
    expect(firstRequests).toHaveLength(3);
    expect(requestMessagesText(firstRequests[1]!)).toContain(`group:${group} · 4 members`);
    expect(requestMessagesText(firstRequests[1]!)).toContain('ann (human)');
    expect(requestMessagesText(firstRequests[2]!)).toContain(`delivered to ${second}`);
    expect(h.llm.requests.length - beforeRequests).toBe(4);
  }, 120_000);

  test('agent_send_group_message refuses a group the agent is not in; agent_create_group_chat makes one it is in', async () => {
    const [first, second] = agents as [string, string, string];
    const other = `side-${Date.now()}`;
    const conversation = randomUUID();
    h.llm.setResponder((r) => {
      const body = requestMessagesText(r);
      if (!body.includes(conversation)) return text('[NO_RESPONSE]');
      const done = (body.match(/"tool_result"/g) ?? []).length;
      if (done === 0) return toolCall('agent_send_group_message', { group: other, text: 'hello?' });
      if (done === 1) return toolCall('agent_create_group_chat', { name: other, agents: [second], humans: ['ann'] });
      return text('created');
    });
    for await (const e of conv.chat(first, `${conversation}: make a side group with ${second}`, { from: ann })) void e;
    const requests = h.llm.requests.filter((r) => requestMessagesText(r).includes(conversation));
    expect(requests).toHaveLength(3);
    expect(requestMessagesText(requests[1]!)).toContain(`you are in no group chat \\"${other}\\"`);
    expect(requestMessagesText(requests[2]!)).toContain(`Created group:${other}`);
    expect((await conv.group(other)).members).toEqual(
      expect.arrayContaining([
        { type: 'agent', id: first },
        { type: 'agent', id: second },
        { type: 'human', id: 'ann' },
      ]),
    );
  }, 90_000);

  test('bad input: unknown group, a non-member, an unknown agent, a direct delivery to a group the agent is not in', async () => {
    await expect(conv.postToGroup('no-such-group', ann, 'hi')).rejects.toThrow(/unknown group "no-such-group"/);
    await expect(conv.postToGroup(group, { type: 'human', id: 'mallory' }, 'hi')).rejects.toThrow(
      /human:mallory is not a member/,
    );
    await expect(conv.postToGroup(group, ann, '  ')).rejects.toThrow(DeliveryRejectedError);
    await expect(conv.postToGroup(group, ann, 'a\u0000b')).rejects.toThrow(/text contains a NUL character/);
    await expect(conv.createGroup(group, [{ type: 'agent', id: agents[0]! }])).rejects.toThrow(/already exists/);
    await expect(conv.createGroup('other', [{ type: 'agent', id: 'nobody-here' }])).rejects.toThrow(
      /unknown agent "nobody-here"/,
    );
    const outsider = await h.createAgent();
    agents.push(outsider);
    await expect(
      conv.deliver(outsider, { kind: 'chat', from: ann, text: 'hi', channel: `group:${group}` }),
    ).rejects.toThrow(/is not a member of group/);
    expect(await h.db.db.selectFrom('mailbox_items').select('id').where('agent_id', '=', outsider).execute()).toEqual(
      [],
    );
  }, 60_000);

  test('task comments: each @mentioned agent (not the assignee, not the author, not an unknown name) answers in the task thread', async () => {
    const [assignee, b, c] = agents as [string, string, string];
    h.llm.setResponder((r) => {
      const body = JSON.stringify(r.body.messages);
      if (body.includes('[MENTION in a comment')) return text('mentioned and answering');
      if (body.includes('[COMMENT on task')) return text('assignee answering');
      return {
        kind: 'message',
        content: [{ type: 'tool_use', name: 'task_submit_review', input: { summary: 'done' } }],
        stopReason: 'tool_use',
      };
    });
    const { taskId } = await h.client.startTask({
      agentId: assignee,
      title: 'Plan the release',
      description: 'plan it',
    });
    await eventually(
      () => h.db.db.selectFrom('tasks').select('id').where('id', '=', taskId).executeTakeFirst(),
      'the task to be stored',
    );
    const { itemId, mentioned } = await conv.comment(
      taskId,
      `@${b} and @${c}, please check; @${assignee} FYI; @nobody-here too. @${b} again`,
      ann,
    );
    expect(mentioned).toEqual([b, c]);

    const answers = await eventually(
      async () => {
        const events = (await h.client.events(taskId)).filter((e) => e.type === 'comment-answered');
        return events.length >= 3 ? events : undefined;
      },
      'three threaded answers',
      60_000,
    );
    const mentions = await h.db.db
      .selectFrom('mailbox_items')
      .selectAll()
      .where('kind', '=', 'mention')
      .where('task_id', '=', taskId)
      .orderBy('agent_id')
      .execute();
    expect(mentions.map((m) => [m.agent_id, m.channel, m.reply_to])).toEqual(
      [
        [b, `task:${taskId}`, itemId],
        [c, `task:${taskId}`, itemId],
      ].sort((x, y) => x[0]!.localeCompare(y[0]!)),
    );
    expect(answers.map((e) => e.data).sort((x, y) => String(x.from).localeCompare(String(y.from)))).toEqual(
      [
        { replyTo: itemId, from: assignee, text: 'assignee answering' },
        ...mentions.map((m) => ({ replyTo: m.id, from: m.agent_id, text: 'mentioned and answering' })),
      ].sort((x, y) => x.from.localeCompare(y.from)),
    );
    await expect(conv.comment('no-such-task', 'hi', ann)).rejects.toThrow(/unknown task "no-such-task"/);
  }, 90_000);

  test("an agent's task_comment routes @mentions as a human comment does: once, not the author or the assignee", async () => {
    const [assignee, b, c] = agents as [string, string, string];
    const taskId = `comment-routing-${randomUUID()}`;
    h.llm.setResponder((r) => {
      const body = requestMessagesText(r);
      if (body.includes('[MENTION in a comment')) return text('checked the plan');
      if (!body.includes(taskId)) return text('[NO_RESPONSE]');
      const done = (body.match(/"tool_result"/g) ?? []).length;
      if (done === 0)
        return toolCall('task_comment', {
          task_id: taskId,
          text: `@${b} please double-check the plan. @${assignee} and @nobody-here are skipped; @${b} again`,
        });
      return toolCall('task_submit_review', { summary: 'plan written, b asked to check' });
    });
    await h.client.startTask({
      agentId: assignee,
      taskId,
      title: 'Plan with a check',
      description: 'plan it and ask for a check',
    });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    const answered = await eventually(
      async () => (await h.client.events(taskId)).find((e) => e.type === 'comment-answered'),
      'the mentioned agent to answer',
      60_000,
    );

    const comment = (await h.client.events(taskId)).find((e) => e.type === 'comment-added')!;
    expect(comment.data).toMatchObject({ from: `agent:${assignee}` });
    const mentions = await h.db.db
      .selectFrom('mailbox_items')
      .selectAll()
      .where('kind', '=', 'mention')
      .where('task_id', '=', taskId)
      .execute();
    expect(mentions.map((m) => [m.agent_id, m.from_type, m.from_id, m.channel, m.reply_to])).toEqual([
      [b, 'agent', assignee, `task:${taskId}`, comment.data.commentId],
    ]);
    expect(answered.data).toEqual({ replyTo: mentions[0]!.id, from: b, text: 'checked the plan' });
    // The mention was answered in the comment_response scenario.
    const mentionRequest = h.llm.requests.find(
      (r) => requestMessagesText(r).includes('[MENTION in a comment') && requestMessagesText(r).includes(taskId),
    )!;
    expect(requestSystemText(mentionRequest)).toContain('### Comment response');
    // The tool told the author who was asked.
    expect(h.llm.requests.some((r) => requestMessagesText(r).includes(`asked ${b} to answer in the thread`))).toBe(
      true,
    );
    expect(
      await h.db.db
        .selectFrom('mailbox_items')
        .select('id')
        .where('agent_id', '=', c)
        .where('task_id', '=', taskId)
        .execute(),
    ).toEqual([]);
  }, 90_000);

  test("an agent's task_comment on another agent's task reaches the assignee's mailbox and is answered in the thread", async () => {
    const [assignee, , commenter] = agents as [string, string, string];
    const taskId = `agent-comment-${randomUUID()}`;
    const conversation = randomUUID();
    h.llm.setResponder((r) => {
      const body = requestMessagesText(r);
      if (body.includes('[COMMENT on task') && body.includes(taskId)) return text('yes, the plan is final');
      if (body.includes(conversation)) {
        if (!body.includes('tool_result'))
          return toolCall('task_comment', { task_id: taskId, text: 'is the plan final?' });
        return text('asked');
      }
      if (body.includes(taskId)) return toolCall('task_submit_review', { summary: 'plan written' });
      return text('[NO_RESPONSE]');
    });
    await h.client.startTask({ agentId: assignee, taskId, title: 'Plan to check', description: 'write the plan' });
    await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
    for await (const e of conv.chat(commenter, `${conversation}: ask about the plan on task ${taskId}`, { from: ann }))
      void e;

    const answered = await eventually(
      async () => (await h.client.events(taskId)).find((e) => e.type === 'comment-answered'),
      'the assignee to answer',
      60_000,
    );
    const items = await h.db.db
      .selectFrom('mailbox_items')
      .selectAll()
      .where('kind', '=', 'comment')
      .where('task_id', '=', taskId)
      .execute();
    expect(items.map((i) => [i.agent_id, i.from_type, i.from_id, i.text])).toEqual([
      [assignee, 'agent', commenter, 'is the plan final?'],
    ]);
    expect(answered.data).toEqual({ replyTo: items[0]!.id, from: assignee, text: 'yes, the plan is final' });
    expect(
      h.llm.requests.some((r) =>
        requestMessagesText(r).includes(`${assignee} sees it in its next step and answers in the thread`),
      ),
    ).toBe(true);
  }, 90_000);

  test("agents' comments on one task stop at the hourly budget; the hour before does not count", async () => {
    const [assignee, b, c] = agents as [string, string, string];
    h.llm.setResponder(() => toolCall('task_submit_review', { summary: 'ok' }));
    const { taskId } = await h.client.startTask({ agentId: assignee, title: 'Budgeted', description: 'x' });
    await eventually(
      () => h.db.db.selectFrom('tasks').select('id').where('id', '=', taskId).executeTakeFirst(),
      'the task to be stored',
    );
    const row = (i: number, minutesAgo: number) => ({
      id: `budget-${taskId}-${minutesAgo}-${i}`,
      agent_id: b,
      kind: 'mention',
      from_type: 'agent',
      from_id: c,
      channel: `task:${taskId}`,
      text: 'x',
      thread_id: 'x',
      task_id: taskId,
      priority: 1,
      status: 'completed',
      decision: 'pick',
      created_at: new Date(Date.now() - minutesAgo * 60_000),
    });
    // Older deliveries are outside the window; the last hour's fill the budget.
    await h.db.db
      .insertInto('mailbox_items')
      .values(Array.from({ length: 3 }, (_, i) => row(i, 61)))
      .execute();
    await h.db.db
      .insertInto('mailbox_items')
      .values(Array.from({ length: AGENT_COMMENT_DELIVERIES_PER_TASK_HOUR - 1 }, (_, i) => row(i, 5)))
      .execute();
    expect(await agentCommentRoom(h.db.db, taskId)).toBe(1);
    await h.db.db.insertInto('mailbox_items').values(row(99, 1)).execute();
    expect(await agentCommentRoom(h.db.db, taskId)).toBe(0);

    const from = { type: 'agent' as const, id: c };
    expect(
      await deliverCommentMentions(h.db.db, h.temporal, h.taskQueue, {
        taskId,
        text: `@${b} again?`,
        from,
        commentItemId: `budget-${taskId}`,
        skip: [assignee],
      }),
    ).toEqual([]);
    expect(
      await deliverAgentComment(h.db.db, h.temporal, h.taskQueue, {
        taskId,
        assignee,
        fromAgentId: c,
        text: 'again?',
        commentId: `budget-${taskId}`,
      }),
    ).toBeUndefined();
    expect(
      await h.db.db
        .selectFrom('mailbox_items')
        .select('id')
        .where('task_id', '=', taskId)
        .where('id', 'not like', 'budget-%')
        .execute(),
    ).toEqual([]);
  }, 60_000);

  test('a task item without a task id starts a task for the agent, once', async () => {
    const [agent] = agents as [string];
    h.llm.setResponder(() => ({
      kind: 'message',
      content: [{ type: 'tool_use', name: 'task_submit_review', input: { summary: 'notes written' } }],
      stopReason: 'tool_use',
    }));
    const { itemId } = await conv.deliver(agent, {
      kind: 'task',
      from: ann,
      text: 'Write the release notes\nCover the group chat.',
    });
    const item = await eventually(
      async () => (await conv.mailbox(agent)).items.find((i) => i.itemId === itemId && i.status === 'completed'),
      'the task item to be handled',
      60_000,
    );
    expect(item.result).toBe(`started task mailbox-${itemId}`);
    const task = await h.waitForStatus(`mailbox-${itemId}`, (s) => s.state === 'review', 60_000);
    expect(task).toMatchObject({ state: 'review' });
    const row = await h.db.db
      .selectFrom('tasks')
      .selectAll()
      .where('id', '=', `mailbox-${itemId}`)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({
      agent_id: agent,
      title: 'Write the release notes',
      description: 'Write the release notes\nCover the group chat.',
      created_by: 'human:ann',
    });
  }, 90_000);
});
