/**
 * Records the workflow histories that `test/workflow/replay.test.ts` replays on every `npm test` (the
 * determinism gate), into `test/histories/<version>/` for the version in package.json. Histories of
 * other versions are never touched: runs started by an older release may still be open in production,
 * and the new code must replay them (see the deploy policy in docs/operations.md). Run it for each release,
 * and after a deliberate change to a workflow's command order (behind `patched()`), never to make a
 * failing replay pass:
 *
 *   npx tsx scripts/record-histories.ts            # all scenarios
 *   npx tsx scripts/record-histories.ts cancel     # only the named ones (their files in this version are replaced)
 *
 * It starts its own Temporal dev server (in memory, free port) on which Temporal suggests continuing
 * as new after SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS events, so that the continue-as-new scenario stays
 * a few hundred events; a fake LLM server; and a worker. PostgreSQL: DATABASE_URL, else an embedded
 * PostgreSQL in a temporary folder. Each workflow run becomes `test/histories/<version>/<scenario>--<run>.json`,
 * in the JSON format of `temporal workflow show --output json`.
 */
import type { ChildProcess } from 'node:child_process';
import { freeLoopbackPort } from '../activities/store/db';
import { quietLogger } from '../test/support/quiet-logger';
import { startTemporalDevServer } from '../test/support/temporal-cli';
import { mkdirSync, readFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { bundleWorkflowCode } from '@temporalio/worker';
import { openDatabase } from '../activities/store/db';
import {
  commentSignal,
  pauseSignal,
  reflectionWorkflowId,
  resumeSignal,
  roundWorkflowId,
  taskWorkflowId,
} from '../workflows/contract';
import { createHarness, submitTurn, textTurn, toolTurn, type Harness } from '../test/support/harness';
import { agentWorkflowId, chatRunWorkflowId, ConversationClient } from '../client/chat';
import { isReflection, offersTools, ScriptedAgents } from '../test/workflow/task-support';
import { subagentWorkflowId } from '../workflows/subagent-contract';
import { randomUUID } from 'node:crypto';
import { ForkClient } from '../client/forks';
import { evalForkTaskId } from '../workflows/eval-contract';

/** Small enough that a dozen tool iterations make the round continue as new; larger than the other scenarios' runs. */
const SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS = 100;
/**
 * Iterations of the continue-as-new scenario: quick steps run as local activities (one marker event
 * each) and Temporal's suggestion reaches the round at its regular steps, one per LOCAL_STEP_CHAIN_MAX_MS
 * of local steps, so it takes a few chains (24 iterations were enough while every step was an activity).
 */
const CONTINUE_AS_NEW_ITERATIONS = 200;
/**
 * Delay between the fake's stream events in that scenario (about ten per answer): steps of ~0.1 s, so
 * that the 200 iterations span several 5 s chains; at full speed they fit in one.
 */
const CONTINUE_AS_NEW_CHUNK_DELAY_MS = 10;
const ROOT = path.resolve(__dirname, '..');
/** This release's folder; older releases' folders stay as they were recorded. */
const HISTORIES_DIR = path.join(
  ROOT,
  'test',
  'histories',
  (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version,
);

interface Scenario {
  description: string;
  run(h: Harness, agents: ScriptedAgents): Promise<string[]>;
}

/** Each scenario returns the workflow ids whose runs it wants recorded. */
const SCENARIOS: Record<string, Scenario> = {
  approval: {
    description: 'a full task: one approval by signal, one by update, a comment, accept (which starts the reflection)',
    async run(h, agents) {
      const agentId = await h.createAgent();
      const taskId = agents.task([
        toolTurn('shell_execute', { command: 'touch recorded.txt' }),
        toolTurn('request_user_approval', { question: 'Ship it?', options: ['yes', 'no'] }),
        submitTurn('touched and asked'),
      ]);
      const { handle } = await h.client.startTask({
        agentId,
        taskId,
        title: 'Approval',
        description: 'needs two approvals',
      });
      const first = await h.waitForStatus(taskId, (s) => s.pendingApprovals.length === 1);
      await h.client.signalApproval(taskId, {
        requestId: first.pendingApprovals[0]!.requestId,
        decision: 'approved',
        comment: 'fine',
        decidedBy: 'alice',
      });
      await h.client.handle(taskId).signal(commentSignal, { text: 'remember the changelog', from: 'carol' });
      const second = await h.waitForStatus(
        taskId,
        (s) =>
          s.pendingApprovals.length === 1 && s.pendingApprovals[0]!.requestId !== first.pendingApprovals[0]!.requestId,
      );
      await h.client.decideApproval(taskId, {
        requestId: second.pendingApprovals[0]!.requestId,
        decision: 'approved',
        comment: 'yes',
        decidedBy: 'bob',
      });
      await h.waitForStatus(taskId, (s) => s.state === 'review');
      await h.client.review(taskId, { decision: 'accept', decidedBy: 'rita' });
      await handle.result();
      await h.temporal.workflow.getHandle(reflectionWorkflowId(taskId)).result();
      return [taskWorkflowId(taskId), roundWorkflowId(taskId, 1), reflectionWorkflowId(taskId)];
    },
  },
  heartbeat: {
    description: 'a forced heartbeat check-in answered with HEARTBEAT_OK',
    async run(h) {
      const agentId = await h.createAgent();
      h.llm.setResponder(() => textTurn('HEARTBEAT_OK'));
      const workflowId = `heartbeat-${agentId}-recorded`;
      await h.temporal.workflow.execute('heartbeatWorkflow', {
        workflowId,
        taskQueue: h.taskQueue,
        args: [{ agentId, force: true }],
      });
      return [workflowId];
    },
  },
  consolidation: {
    description: 'a memory consolidation: the daily report written, the dream skipped for too few observations',
    async run(h) {
      const agentId = await h.createAgent();
      h.llm.setResponder(() => textTurn('Daily report: one task reviewed, nothing pending.'));
      const workflowId = `consolidation-${agentId}-recorded`;
      await h.temporal.workflow.execute('memoryConsolidationWorkflow', {
        workflowId,
        taskQueue: h.taskQueue,
        args: [{ agentId }],
      });
      return [workflowId];
    },
  },
  revision: {
    description: 'submit, revise (round 2 with a fresh session), submit, accept',
    async run(h, agents) {
      const agentId = await h.createAgent();
      const taskId = agents.task([toolTurn('task_note', { note: 'first try' }), submitTurn('v1'), submitTurn('v2')]);
      const { handle } = await h.client.startTask({
        agentId,
        taskId,
        title: 'Revision',
        description: 'needs a second round',
      });
      await h.waitForStatus(taskId, (s) => s.state === 'review');
      await h.client.review(taskId, { decision: 'revise', feedback: 'add a test', decidedBy: 'rita' });
      await h.waitForStatus(taskId, (s) => s.state === 'review' && s.round === 2);
      await h.client.review(taskId, { decision: 'accept', decidedBy: 'rita' });
      await handle.result();
      await h.temporal.workflow.getHandle(reflectionWorkflowId(taskId)).result();
      return [taskWorkflowId(taskId), roundWorkflowId(taskId, 1), roundWorkflowId(taskId, 2)];
    },
  },
  cancel: {
    description: 'cancelled while the LLM streams',
    async run(h, agents) {
      const agentId = await h.createAgent();
      const taskId = agents.task([{ kind: 'hang' }]);
      const { handle } = await h.client.startTask({
        agentId,
        taskId,
        title: 'Cancel',
        description: 'cancelled mid-stream',
      });
      await agents.waitForRequests(taskId, 1);
      await handle.cancel();
      await handle.result().catch(() => undefined);
      return [taskWorkflowId(taskId), roundWorkflowId(taskId, 1)];
    },
  },
  'pause-resume': {
    description:
      'a comment, then paused while the LLM streams (→ blocked), resumed in the same round and session, accepted',
    async run(h, agents) {
      const agentId = await h.createAgent();
      const taskId = agents.task([{ kind: 'hang' }, submitTurn('done after the pause')]);
      const { handle } = await h.client.startTask({ agentId, taskId, title: 'Pause', description: 'paused once' });
      await agents.waitForRequests(taskId, 1);
      await h.client.handle(taskId).signal(commentSignal, { text: 'use the staging database', from: 'dora' }); // handed back by the cancelled attempt
      await new Promise((r) => setTimeout(r, 300));
      await handle.signal(pauseSignal, { reason: 'lunch' });
      await h.waitForStatus(taskId, (s) => s.state === 'blocked');
      await handle.signal(resumeSignal);
      await h.waitForStatus(taskId, (s) => s.state === 'review');
      await h.client.review(taskId, { decision: 'accept' });
      await handle.result();
      await h.temporal.workflow.getHandle(reflectionWorkflowId(taskId)).result();
      return [taskWorkflowId(taskId), roundWorkflowId(taskId, 1)];
    },
  },
  'task-continue-as-new': {
    description: `paused and resumed until the task workflow itself continues as new (suggested after ${SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS} events), then accepted`,
    async run(h, agents) {
      const agentId = await h.createAgent();
      const PAUSES = 5;
      const taskId = agents.task([
        ...Array.from({ length: PAUSES }, () => ({ kind: 'hang' as const })),
        submitTurn('done after many pauses'),
      ]);
      const { handle } = await h.client.startTask({
        agentId,
        taskId,
        title: 'Many pauses',
        description: 'paused again and again',
      });
      for (let i = 1; i <= PAUSES; i++) {
        await agents.waitForRequests(taskId, i);
        await handle.signal(pauseSignal, { reason: `pause ${i}` });
        await h.waitForStatus(taskId, (s) => s.state === 'blocked');
        await handle.signal(resumeSignal);
      }
      await h.waitForStatus(taskId, (s) => s.state === 'review');
      await h.client.review(taskId, { decision: 'accept' });
      await handle.result();
      await h.temporal.workflow.getHandle(reflectionWorkflowId(taskId)).result();
      return [taskWorkflowId(taskId)];
    },
  },
  chat: {
    description:
      'an agent entity: a chat (update-with-start), an agent message that waits and one merged into it, a second chat in the same channel; their chat runs',
    async run(h) {
      const agentId = await h.createAgent();
      const conv = new ConversationClient(h.client, { connectionString: h.db.url });
      h.llm.enqueue(textTurn('hello, Ann'), textTurn('noted, Bob'), textTurn('hello again, Ann'));
      const ann = { type: 'human' as const, id: 'ann' };
      const first = await conv.deliver(agentId, { kind: 'chat', from: ann, text: 'hello' });
      const message = await conv.deliver(agentId, {
        kind: 'message',
        from: { type: 'agent', id: 'bob' },
        text: 'release on Friday',
        channel: 'dm:a2a:bob',
      });
      await conv.deliver(agentId, {
        kind: 'message',
        from: { type: 'agent', id: 'bob' },
        text: 'or Monday',
        channel: 'dm:a2a:bob',
      });
      const idle = () => agentIdle(conv, agentId);
      for await (const e of conv.follow(agentId, first.itemId)) void e;
      await idle(); // the message is answered (its reply to the unknown agent bob is refused) before the next chat
      const second = await conv.deliver(agentId, { kind: 'chat', from: ann, text: 'me again' });
      for await (const e of conv.follow(agentId, second.itemId)) void e;
      await idle();
      return [
        agentWorkflowId(agentId),
        chatRunWorkflowId(agentId, first.itemId),
        chatRunWorkflowId(agentId, message.itemId),
      ];
    },
  },
  preempt: {
    description:
      "an agent answering another agent's message (its a2a run streaming) is preempted by a human's chat: the run is cancelled, the chat answered, the message picked again and answered",
    async run(h) {
      const agentId = await h.createAgent();
      const conv = new ConversationClient(h.client, { connectionString: h.db.url });
      h.llm.enqueue({ kind: 'hang' }, textTurn('hello, Ann'), textTurn('Friday it is, Bob'));
      const message = await conv.deliver(agentId, {
        kind: 'message',
        from: { type: 'agent', id: 'bob' },
        text: 'release on Friday?',
        channel: 'dm:a2a:bob',
      });
      while (h.llm.requests.length < 1) await new Promise((r) => setTimeout(r, 50));
      const chat = await conv.deliver(agentId, { kind: 'chat', from: { type: 'human', id: 'ann' }, text: 'hello' });
      for await (const e of conv.follow(agentId, chat.itemId)) void e;
      await agentIdle(conv, agentId);
      const view = await conv.mailbox(agentId);
      if (view.counters.preempted !== 1 || view.items.find((i) => i.itemId === message.itemId)?.status !== 'completed')
        throw new Error(`no preemption recorded: ${JSON.stringify(view)}`);
      return [
        agentWorkflowId(agentId),
        chatRunWorkflowId(agentId, message.itemId),
        chatRunWorkflowId(agentId, chat.itemId),
      ];
    },
  },
  'stream-prune': {
    description: 'one run of the deployment-wide stream pruning',
    async run(h) {
      const workflowId = `stream-prune-recorded-${Date.now()}`;
      await h.temporal.workflow.execute('streamPruneWorkflow', { taskQueue: h.taskQueue, workflowId, args: [{}] });
      return [workflowId];
    },
  },
  'continue-as-new': {
    description: `a round of ${CONTINUE_AS_NEW_ITERATIONS} tool iterations that continues as new (suggested after ${SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS} events)`,
    async run(h, agents) {
      const agentId = await h.createAgent();
      const taskId = agents.task(({ index }) =>
        index < CONTINUE_AS_NEW_ITERATIONS
          ? { ...toolTurn('task_note', { note: `step ${index}` }), chunkDelayMs: CONTINUE_AS_NEW_CHUNK_DELAY_MS }
          : submitTurn(`${CONTINUE_AS_NEW_ITERATIONS} notes`),
      );
      const { handle } = await h.client.startTask({ agentId, taskId, title: 'Long', description: 'many small steps' });
      await h.waitForStatus(taskId, (s) => s.state === 'review', 120_000);
      await h.client.review(taskId, { decision: 'accept' });
      await handle.result();
      await h.temporal.workflow.getHandle(reflectionWorkflowId(taskId)).result();
      return [taskWorkflowId(taskId), roundWorkflowId(taskId, 1)];
    },
  },
  eval: {
    description:
      'an eval of one recorded task under one candidate: the fork (a child task workflow, its call replayed) graded, then cancelled',
    async run(h) {
      const agentId = await h.createAgent();
      // The fork's id is the eval's, not a script's: this scenario answers by what the request holds.
      h.llm.setResponder((request) => {
        if (!offersTools(request)) return textTurn('Summary.');
        return JSON.stringify(request.body).includes('"tool_result"')
          ? submitTurn('report written')
          : toolTurn('file_write', { path: 'report.md', content: 'report' });
      });
      const taskId = `recorded-eval-source-${randomUUID().slice(0, 8)}`;
      await h.client.startTask({ agentId, taskId, title: 'Report', description: 'write report.md' });
      await h.waitForStatus(taskId, (s) => s.state === 'review');
      const forks = new ForkClient(h.temporal, h.db.db, { taskQueue: h.taskQueue });
      const { evalId, workflowId } = await forks.startEval({
        selection: { taskIds: [taskId] },
        candidates: [{ name: 'same' }],
        budgetUsd: 1,
      });
      await forks.evalResult(evalId);
      const forkId = evalForkTaskId(evalId, 0, 0);
      return [workflowId, taskWorkflowId(forkId), roundWorkflowId(forkId, 1)];
    },
  },
  subagents: {
    description:
      'a task with a cost budget spawns 2 sub-agents in parallel (spend reports, the aggregated result through the ledger), submits, accepted',
    async run(h) {
      const agentId = await h.createAgent();
      const taskId = randomUUID();
      let parentTurns = 0;
      h.llm.setResponder((r) => {
        const messages = JSON.stringify(r.body.messages ?? '');
        if (!offersTools(r) || isReflection(r)) return textTurn('Nothing to add.');
        if (messages.includes('[TASK EXECUTION')) {
          parentTurns += 1;
          return parentTurns === 1
            ? toolTurn('spawn_subagents', {
                subagents: [{ task: 'Read the README' }, { task: 'Read the changelog', context: 'It is CHANGELOG.md' }],
              })
            : submitTurn('delegated');
        }
        return textTurn('Sub-agent finding: nothing unusual.');
      });
      const { handle } = await h.client.startTask({
        agentId,
        taskId,
        title: 'Delegate',
        description: 'two sub-agents',
        costBudgetUsd: 100,
      });
      await h.waitForStatus(taskId, (s) => s.state === 'review', 60_000);
      await h.client.review(taskId, { decision: 'accept' });
      await handle.result();
      const round = roundWorkflowId(taskId, 1);
      return [taskWorkflowId(taskId), round, subagentWorkflowId(round, 1), subagentWorkflowId(round, 2)];
    },
  },
};

async function main(): Promise<void> {
  // Its agents' workspaces lie in the OS temp folder: an allowed root for this run (and its workers).
  process.env.AGENTS_WORKSPACE_ALLOWED_ROOTS ??= realpathSync(os.tmpdir());
  const only = process.argv.slice(2);
  const unknown = only.filter((name) => !(name in SCENARIOS));
  if (unknown.length)
    throw new Error(`unknown scenario(s) ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  const selected = Object.entries(SCENARIOS).filter(([name]) => only.length === 0 || only.includes(name));

  const scratch = mkdtempSync(path.join(os.tmpdir(), 'da-record-'));
  const server = await startDevServer();
  let embedded: Awaited<ReturnType<typeof openDatabase>> | undefined;
  try {
    if (!process.env.DATABASE_URL) {
      embedded = await openDatabase({ dataDir: path.join(scratch, 'postgres') });
      process.env.DATABASE_URL = embedded.url;
    }
    const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('../workflows'), logger: quietLogger });
    process.env.TEST_WORKFLOW_BUNDLE = path.join(scratch, 'workflow-bundle.js');
    writeFileSync(process.env.TEST_WORKFLOW_BUNDLE, code);
    process.env.TEMPORAL_ADDRESS = server.address;

    const h = await createHarness();
    await h.startWorker();
    mkdirSync(HISTORIES_DIR, { recursive: true });
    try {
      for (const [name, scenario] of selected) {
        // Only this version's files of this scenario are replaced.
        for (const file of readdirSync(HISTORIES_DIR).filter((f) => f.startsWith(`${name}--`)))
          rmSync(path.join(HISTORIES_DIR, file));
        const workflowIds = await scenario.run(h, new ScriptedAgents(h.llm));
        chatRuns = 0;
        for (const workflowId of workflowIds) await writeRuns(h, name, workflowId);
        console.log(`recorded ${name}: ${scenario.description}`);
      }
    } finally {
      await h.close();
    }
  } finally {
    if (embedded) await embedded.close();
    server.process.kill('SIGTERM');
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Resolves when the agent is idle and every item of its mailbox is finished. */
async function agentIdle(conv: ConversationClient, agentId: string): Promise<void> {
  for (;;) {
    const view = await conv.mailbox(agentId);
    if (view.attention === 'idle' && view.items.every((i) => i.status === 'completed' || i.status === 'merged')) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Chat runs are numbered per scenario, in the order the scenario returns them. */
let chatRuns = 0;

/** Writes every run of a workflow id, oldest first: `<scenario>--<task|round-N|agent|chat-run-N>[-run-K].json`. */
async function writeRuns(h: Harness, scenario: string, workflowId: string): Promise<void> {
  const runs = [];
  for await (const run of h.temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.push(run);
  runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  const round = /^task-.*-r(\d+)$/.exec(workflowId);
  const sub = /-sub-(\d+)$/.exec(workflowId);
  const label = sub
    ? `sub-${sub[1]}`
    : round
      ? `round-${round[1]}`
      : workflowId.startsWith('agent-')
        ? /-chat-/.test(workflowId)
          ? `chat-run-${++chatRuns}`
          : 'agent'
        : (/^(reflection|heartbeat|consolidation|stream-prune|eval)-/.exec(workflowId)?.[1] ?? 'task');
  for (const [i, run] of runs.entries()) {
    const history = await h.temporal.workflow.getHandle(workflowId, run.runId).fetchHistory();
    const file = path.join(HISTORIES_DIR, `${scenario}--${label}${runs.length > 1 ? `-run-${i + 1}` : ''}.json`);
    writeFileSync(file, `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 1)}\n`);
    console.log(`  ${path.relative(ROOT, file)}: ${history.events?.length ?? 0} events, ${run.status.name}`);
  }
}

/** `temporal server start-dev` on a free port, in memory, suggesting continue-as-new early (see above). */
async function startDevServer(): Promise<{ address: string; process: ChildProcess }> {
  return startTemporalDevServer(
    await freeLoopbackPort(),
    ['--dynamic-config-value', `limit.historyCount.suggestContinueAsNew=${SUGGEST_CONTINUE_AS_NEW_AFTER_EVENTS}`],
    'inherit-stderr',
  );
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
