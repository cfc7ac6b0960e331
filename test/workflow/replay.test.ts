import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime, Worker, type ReplayResult } from '@temporalio/worker';

/**
 * The determinism gate: workflow histories recorded from representative runs (scripts/record-histories.ts)
 * are replayed against the current workflow bundle. A change to a workflow's command order that is
 * not behind `patched()` makes a replay fail here, before it can break running workflows.
 */
const HISTORIES_DIR = path.resolve(__dirname, '..', 'histories');
const SCENARIOS = ['approval', 'revision', 'cancel', 'pause-resume', 'continue-as-new', 'task-continue-as-new', 'chat'];

interface RecordedHistory {
  name: string;
  history: { events: Array<Record<string, unknown> & { eventType: string }> };
}

function recordedHistories(): RecordedHistory[] {
  return readdirSync(HISTORIES_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f.replace(/\.json$/, ''), history: JSON.parse(readFileSync(path.join(HISTORIES_DIR, f), 'utf8')) as RecordedHistory['history'] }));
}

async function replay(histories: RecordedHistory[]): Promise<ReplayResult[]> {
  const results: ReplayResult[] = [];
  const replays = Worker.runReplayHistories(
    { workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! }, replayName: 'determinism-gate' },
    histories.map(({ name, history }) => ({ workflowId: name, history })),
  );
  for await (const result of replays) results.push(result);
  return results;
}

describe('recorded workflow histories replay on the current code', () => {
  beforeAll(() => {
    try {
      Runtime.install({ logger: new DefaultLogger('ERROR') });
    } catch {
      // Already installed by another test in this process.
    }
  });

  const histories = recordedHistories();

  test('every scenario is recorded: a full task with approvals, a revision round, a cancel, a pause/resume and a continue-as-new', () => {
    for (const scenario of SCENARIOS) expect(histories.some((h) => h.name.startsWith(`${scenario}--`))).toBe(true);
    const endings = (name: string) => histories.filter((h) => h.name.startsWith(name)).map((h) => h.history.events.at(-1)!.eventType);
    expect(endings('cancel--task')).toEqual(['EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED']);
    expect(endings('continue-as-new--round-1-run-1')).toEqual(['EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW']);
    expect(endings('revision--round-2')).toEqual(['EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED']);
    const approvalTask = histories.find((h) => h.name === 'approval--task')!.history.events.map((e) => e.eventType);
    expect(approvalTask).toContain('EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED');
  });

  test.each(histories.map((h) => [h.name, h]))('%s replays without non-determinism', async (_name, history) => {
    const [result] = await replay([history]);
    expect(result!.error).toBeUndefined();
  });

  test('the gate bites: a history whose commands no longer match the code fails to replay', async () => {
    const original = histories.find((h) => h.name === 'revision--task')!;
    const tampered = structuredClone(original);
    const scheduled = tampered.history.events.find((e) => e.eventType === 'EVENT_TYPE_ACTIVITY_TASK_SCHEDULED')!;
    const attributes = scheduled.activityTaskScheduledEventAttributes as { activityType: { name: string } };
    expect(attributes.activityType.name).toBe('loadTaskContext');
    attributes.activityType.name = 'somethingElse';
    const [result] = await replay([tampered]);
    expect(result!.error).toBeDefined();
    expect(result!.error!.name).toMatch(/DeterminismViolationError|ReplayError/);
  });
});
