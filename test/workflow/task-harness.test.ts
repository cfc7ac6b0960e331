import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { commentSignal, pauseSignal, resumeSignal, roundWorkflowId } from '../../workflows/contract';
import {
  REFLECTION_CHECKPOINT_EVERY_TOOL_ITERATIONS,
  TASK_MAX_NO_SUBMIT_RETRIES,
  TASK_REMINDER_EVERY_TOOL_ITERATIONS,
  TOOL_RESULT_OFFLOAD_CHARS,
  TOOL_RESULT_PREVIEW_CHARS,
} from '../../workflows/rules/harness';
import { CONTINUATION_PROMPT } from '../../prompts/task';
import { MEMORY_FLUSH_PROMPT } from '../../prompts/memory';
import { submitTurn, textTurn, toolTurn } from '../support/harness';
import { lastToolResults, useScriptedHarness } from './task-support';

/** The task harness rules, observed in what the fake LLM server received. */
describe('task harness rules', () => {
  const { h, agents } = useScriptedHarness();
  beforeAll(() => {
    writeFileSync(path.join(h.workspaceDir, 'readme.txt'), 'a small file');
  });

  const injections = async (taskId: string, round = 1): Promise<string[]> => {
    const rows = await h.db.db
      .selectFrom('messages')
      .select('content')
      .where('session_id', '=', `task_${taskId}_r${round}`)
      .where('kind', '=', 'injection')
      .orderBy('id')
      .execute();
    return rows.map((r) => (r.content as Array<{ text?: string }>).map((b) => b.text ?? '').join(''));
  };
  const roundRuns = async (taskId: string, round = 1) => {
    const runs = [];
    for await (const run of h.temporal.workflow.list({ query: `WorkflowId = '${roundWorkflowId(taskId, round)}'` }))
      runs.push(run);
    return runs;
  };

  test(`a [SYSTEM REMINDER] every ${TASK_REMINDER_EVERY_TOOL_ITERATIONS} tool iterations and a [REFLECTION CHECKPOINT] every ${REFLECTION_CHECKPOINT_EVERY_TOOL_ITERATIONS}`, async () => {
    const ITERATIONS = 31;
    const agentId = await h.createAgent();
    const taskId = agents.task(({ index }) =>
      index < ITERATIONS ? toolTurn('file_read', { path: 'readme.txt' }) : submitTurn('read it 31 times'),
    );
    await h.client.startTask({ agentId, taskId, title: 'Read', description: 'read the readme many times' });
    const status = await h.waitForStatus(taskId, (s) => s.state === 'review', 90_000);
    expect(status.submission).toBe('read it 31 times');

    // Request n is sent after n tool iterations.
    const requests = agents.requests(taskId).map((r) => JSON.stringify(r.body.messages));
    expect(requests).toHaveLength(ITERATIONS + 1);
    expect(requests[9]).not.toContain('[SYSTEM REMINDER');
    expect(requests[10]).toContain(`[SYSTEM REMINDER — Task ${taskId}] You have used 10 tool iterations`);
    expect(requests[29]).not.toContain('[REFLECTION CHECKPOINT');
    expect(requests[30]).toContain('[REFLECTION CHECKPOINT] 30 tool iterations so far');
    expect(requests[30]).toContain(`[SYSTEM REMINDER — Task ${taskId}] You have used 30 tool iterations`);
    const injected = await injections(taskId);
    expect(injected.map((t) => t.slice(0, 60))).toEqual([
      `[SYSTEM REMINDER — Task ${taskId}] You have used 10 tool iterations`.slice(0, 60),
      `[SYSTEM REMINDER — Task ${taskId}] You have used 20 tool iterations`.slice(0, 60),
      // The session passed 50 messages: the agent is asked once to save memory before compaction.
      MEMORY_FLUSH_PROMPT.slice(0, 60),
      `[SYSTEM REMINDER — Task ${taskId}] You have used 30 tool iterations`.slice(0, 60),
      '[REFLECTION CHECKPOINT] 30 tool iterations so far. Pause and'.slice(0, 60),
    ]);
    // The task prompt stays the first message however much was compressed.
    expect(requests[30]).toContain(`[TASK EXECUTION — Task ID: ${taskId}]`);
  }, 120_000);

  test('a comment signal is merged into the next LLM turn', async () => {
    const agentId = await h.createAgent();
    const slowRead = { ...toolTurn('file_read', { path: 'readme.txt' }), chunkDelayMs: 100 };
    const taskId = agents.task([slowRead, submitTurn('done')]);
    await h.client.startTask({ agentId, taskId, title: 'Comment', description: 'take a comment' });
    await agents.waitForRequests(taskId, 1);
    await h.client.handle(taskId).signal(commentSignal, { text: 'Please also update the changelog', from: 'carol' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    const [first, second] = agents.requests(taskId).map((r) => JSON.stringify(r.body.messages));
    expect(first).not.toContain('Please also update the changelog');
    expect(second).toContain('[COMMENT from carol] Please also update the changelog');
  });

  test('a comment that arrives during the turn that submits is not lost: the revision round gets it', async () => {
    const agentId = await h.createAgent();
    const slowSubmit = { ...submitTurn('v1'), chunkDelayMs: 100 };
    const taskId = agents.task([slowSubmit, submitTurn('v2')]);
    await h.client.startTask({ agentId, taskId, title: 'Late comment', description: 'a comment comes late' });
    await agents.waitForRequests(taskId, 1);
    await h.client
      .handle(taskId)
      .signal(commentSignal, { text: 'Mention the migration in the summary', from: 'carol' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    await h.client.review(taskId, { decision: 'revise', feedback: 'Shorter, please.' });
    await h.waitForStatus(taskId, (s) => s.state === 'review' && s.round === 2);
    const [first, second] = agents.requests(taskId).map((r) => JSON.stringify(r.body.messages));
    expect(first).not.toContain('Mention the migration');
    expect(second).toContain('[COMMENT from carol] Mention the migration in the summary');
  });

  test('pause → blocked (the LLM stream stops) → resume → the same round and session, with the "interrupted" notice and no comment lost', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([{ kind: 'hang' }, submitTurn('done after the pause')]);
    const { handle } = await h.client.startTask({ agentId, taskId, title: 'Pause', description: 'will be paused' });
    await agents.waitForRequests(taskId, 1);
    // A comment that reaches the round while its LLM call streams, not yet seen by the model …
    await h.client.handle(taskId).signal(commentSignal, { text: 'Use the staging database', from: 'dora' });
    await new Promise((r) => setTimeout(r, 300));
    const abortedBefore = h.llm.abortedRequests;
    await handle.signal(pauseSignal, { reason: 'lunch' });
    // … and one sent while the task is blocked.
    await h.waitForStatus(taskId, (s) => s.state === 'blocked');
    await h.client.handle(taskId).signal(commentSignal, { text: 'Also keep the logs', from: 'dora' });
    const blocked = await h.waitForStatus(taskId, (s) => s.state === 'blocked');
    expect(blocked).toMatchObject({ round: 1, phase: 'paused' });
    await h.llm.waitForAbortedRequests(abortedBefore + 1, 5_000);
    expect((await h.client.getTaskRow(taskId)).state).toBe('blocked');
    expect((await handle.describe()).searchAttributes.TaskState).toEqual(['blocked']);

    await handle.signal(resumeSignal);
    const resumed = await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(resumed.round).toBe(1);
    const second = JSON.stringify(agents.requests(taskId)[1]!.body.messages);
    expect(second).toContain(`[TASK EXECUTION — Task ID: ${taskId}]`);
    expect(second).toContain('[SYSTEM: Your previous execution attempt was interrupted');
    // Neither comment was lost with the cancelled attempt: both reach the model once, after the resume.
    expect(second).toContain('[COMMENT from dora] Use the staging database');
    expect(second).toContain('[COMMENT from dora] Also keep the logs');
    expect(second.split('Use the staging database')).toHaveLength(2);
    const sessions = await h.db.db.selectFrom('sessions').select('id').where('task_id', '=', taskId).execute();
    expect(sessions.map((s) => s.id)).toEqual([`task_${taskId}_r1`]);
    const runs = await roundRuns(taskId);
    expect(runs.map((r) => r.status.name).sort()).toEqual(['CANCELLED', 'COMPLETED']);
    const states = (await h.client.events(taskId)).filter((e) => e.type === 'state-changed').map((e) => e.data.state);
    expect(states).toEqual(['in_progress', 'blocked', 'in_progress', 'review']);
  });

  test(`a tool result over ${TOOL_RESULT_OFFLOAD_CHARS} characters is offloaded with a preview and read back with read_tool_output`, async () => {
    const SIZE = 120_000;
    const big = `HEAD-MARKER ${'a'.repeat(59_988)}MIDDLE-MARKER${'b'.repeat(SIZE - 60_000 - 13)}`;
    expect(big).toHaveLength(SIZE);
    writeFileSync(path.join(h.workspaceDir, 'big.txt'), big);
    const agentId = await h.createAgent();
    let outputId = '';
    const taskId = agents.task(({ index, request }) => {
      if (index === 0) return toolTurn('file_read', { path: 'big.txt' });
      if (index === 1) {
        outputId = /out_[0-9a-f]{24}/.exec(lastToolResults(request)[0]!.text)?.[0] ?? 'missing';
        return toolTurn('read_tool_output', { id: outputId, offset: 59_990, limit: 100 });
      }
      return submitTurn('read the middle');
    });
    await h.client.startTask({ agentId, taskId, title: 'Big', description: 'read a big file' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');

    const [preview] = lastToolResults(agents.requests(taskId)[1]!);
    expect(preview!.text.length).toBeLessThan(TOOL_RESULT_PREVIEW_CHARS + 400);
    expect(preview!.text.startsWith('HEAD-MARKER')).toBe(true);
    expect(preview!.text).not.toContain('MIDDLE-MARKER');
    expect(preview!.text).toContain(`[Output truncated: ${SIZE} characters in all.`);
    expect(outputId).toMatch(/^out_/);
    const stored = await h.db.db
      .selectFrom('tool_outputs')
      .select(['chars', 'content'])
      .where('id', '=', outputId)
      .executeTakeFirstOrThrow();
    expect(stored.chars).toBe(SIZE);
    expect(stored.content).toBe(big);
    const [expanded] = lastToolResults(agents.requests(taskId)[2]!);
    expect(expanded!.isError).toBe(false);
    expect(expanded!.text).toContain('aaaaaaaaaaMIDDLE-MARKERbbbb');
    expect(expanded!.text).toContain(`[characters 59990–60090 of ${SIZE}; continue with offset=60090]`);
  });

  test('max_tokens gets the continuation prompt', async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task([textTurn('The first half of a long answer', 'max_tokens'), submitTurn('continued')]);
    await h.client.startTask({ agentId, taskId, title: 'Long', description: 'a long answer' });
    await h.waitForStatus(taskId, (s) => s.state === 'review');
    expect(JSON.stringify(agents.requests(taskId)[1]!.body.messages)).toContain(CONTINUATION_PROMPT);
    expect(await injections(taskId)).toEqual([CONTINUATION_PROMPT]);
  });

  test(`no submission: one final critical reminder per attempt, then ${TASK_MAX_NO_SUBMIT_RETRIES} retries in the same session, then failed`, async () => {
    const agentId = await h.createAgent();
    const taskId = agents.task(() => textTurn('I believe I am finished.'));
    const { handle } = await h.client.startTask({ agentId, taskId, title: 'Lazy', description: 'never submits' });
    const result = await handle.result();
    expect(result.state).toBe('failed');
    expect(result.error).toBe(
      `the agent stopped ${TASK_MAX_NO_SUBMIT_RETRIES + 1} times without calling task_submit_review`,
    );

    const attempts = TASK_MAX_NO_SUBMIT_RETRIES + 1;
    // Each attempt: the model stops, gets the reminder once, stops again.
    expect(agents.requests(taskId)).toHaveLength(2 * attempts);
    const injected = await injections(taskId);
    const reminders = injected.filter((t) => t.startsWith(`[SYSTEM — CRITICAL REMINDER — Task ${taskId}]`));
    const interrupted = injected.filter((t) =>
      t.startsWith('[SYSTEM: Your previous execution attempt was interrupted'),
    );
    expect(reminders).toHaveLength(attempts);
    expect(interrupted).toHaveLength(attempts - 1);
    expect(injected).toEqual([
      reminders[0],
      ...Array.from({ length: attempts - 1 }, () => [interrupted[0], reminders[0]]).flat(),
    ]);
    const runs = await roundRuns(taskId);
    expect(runs).toHaveLength(attempts);
    expect((await h.client.getTaskRow(taskId)).state).toBe('failed');
    expect((await handle.describe()).searchAttributes.TaskState).toEqual(['failed']);
  }, 120_000);
});
