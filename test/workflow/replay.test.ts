import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, Worker, type ReplayResult } from '@temporalio/worker';
import { quietLogger } from '../support/quiet-logger';
import { installQuietRuntime } from '../support/quiet-runtime';

/**
 * The determinism gate: workflow histories recorded from representative runs (scripts/record-histories.ts)
 * are replayed against the current workflow bundle. Every release keeps its own folder
 * (`test/histories/<version>/`): runs an older release started may still be open when a new one is
 * deployed, so the new code must replay them too. A change to a workflow's command order that is not
 * behind `patched()` fails here, before it can break running workflows.
 */
const ROOT = path.resolve(__dirname, '..', '..');
const HISTORIES_DIR = path.join(ROOT, 'test', 'histories');
const CURRENT_VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;
const TASK_SCENARIOS = ['approval', 'revision', 'cancel', 'pause-resume', 'continue-as-new', 'task-continue-as-new'];
/** Every workflow type the worker registers (the bundle's entry point) must have a history in the current release. */
const WORKFLOW_TYPES = [
  ...readFileSync(path.join(ROOT, 'workflows', 'index.ts'), 'utf8').matchAll(/^export \{ (\w+) \}/gm),
].map((m) => m[1]!);

interface RecordedHistory {
  /** `<version>/<scenario>--<run>` */
  name: string;
  version: string;
  history: { events: Array<Record<string, unknown> & { eventType: string }> };
}

function recordedHistories(): RecordedHistory[] {
  return readdirSync(HISTORIES_DIR, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) =>
      readdirSync(path.join(HISTORIES_DIR, d.name))
        .filter((f) => f.endsWith('.json'))
        .sort()
        .map((f) => ({
          name: `${d.name}/${f.replace(/\.json$/, '')}`,
          version: d.name,
          history: JSON.parse(readFileSync(path.join(HISTORIES_DIR, d.name, f), 'utf8')) as RecordedHistory['history'],
        })),
    );
}

const workflowType = (h: RecordedHistory): string =>
  (h.history.events[0]!.workflowExecutionStartedEventAttributes as { workflowType: { name: string } }).workflowType
    .name;

async function replay(
  histories: RecordedHistory[],
  codePath = process.env.TEST_WORKFLOW_BUNDLE!,
): Promise<ReplayResult[]> {
  const results: ReplayResult[] = [];
  const replays = Worker.runReplayHistories(
    { workflowBundle: { codePath }, replayName: 'determinism-gate' },
    histories.map(({ name, history }) => ({ workflowId: name, history })),
  );
  for await (const result of replays) results.push(result);
  return results;
}

describe('recorded workflow histories replay on the current code', () => {
  beforeAll(() => installQuietRuntime());

  const histories = recordedHistories();
  const current = histories.filter((h) => h.version === CURRENT_VERSION);

  test('the workflow types are read from the bundle entry point', () => {
    expect(WORKFLOW_TYPES).toEqual(
      expect.arrayContaining(['taskWorkflow', 'taskRoundWorkflow', 'agentWorkflow', 'chatRunWorkflow']),
    );
  });

  test("the current release is recorded: every workflow type, every task scenario (approvals, revision, cancel, pause/resume, continue-as-new) and the agent's preemption", () => {
    expect([...new Set(current.map(workflowType))].sort()).toEqual([...WORKFLOW_TYPES].sort());
    for (const scenario of TASK_SCENARIOS)
      expect(current.some((h) => h.name.startsWith(`${CURRENT_VERSION}/${scenario}--`))).toBe(true);
    const endings = (name: string) =>
      current
        .filter((h) => h.name.startsWith(`${CURRENT_VERSION}/${name}`))
        .map((h) => h.history.events.at(-1)!.eventType);
    expect(endings('cancel--task')).toEqual(['EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED']);
    expect(endings('continue-as-new--round-1-run-1')).toEqual(['EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW']);
    expect(endings('revision--round-2')).toEqual(['EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED']);
    const approvalTask = current
      .find((h) => h.name === `${CURRENT_VERSION}/approval--task`)!
      .history.events.map((e) => e.eventType);
    expect(approvalTask).toContain('EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED');
    // The agent entity's preemption path: a running scenario run cancelled for a more urgent item, the
    // item picked again later (a second run under the same workflow id).
    const preempt = current
      .find((h) => h.name === `${CURRENT_VERSION}/preempt--agent`)!
      .history.events.map((e) => e.eventType);
    expect(preempt).toEqual(
      expect.arrayContaining([
        'EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED',
        'EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED',
      ]),
    );
    expect(endings('preempt--chat-run-1-run-1')).toEqual(['EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED']);
    expect(endings('preempt--chat-run-1-run-2')).toEqual(['EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED']);
  });

  test('older releases stay in the gate (the recorder never deletes them)', () => {
    expect(new Set(histories.map((h) => h.version)).size).toBeGreaterThan(1);
  });

  test.each(histories.map((h) => [h.name, h]))('%s replays without non-determinism', async (_name, history) => {
    const [result] = await replay([history]);
    expect(result!.error).toBeUndefined();
  });

  test('the gate bites: a history whose commands no longer match the code fails to replay', async () => {
    const original = current.find((h) => h.name === `${CURRENT_VERSION}/revision--task`)!;
    const tampered = structuredClone(original);
    // The task workflow's first command of its own kind: starting its round.
    const initiated = tampered.history.events.find(
      (e) => e.eventType === 'EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED',
    )!;
    const attributes = initiated.startChildWorkflowExecutionInitiatedEventAttributes as {
      workflowType: { name: string };
    };
    expect(attributes.workflowType.name).toBe('taskRoundWorkflow');
    attributes.workflowType.name = 'somethingElse';
    const [result] = await replay([tampered]);
    expect(result!.error).toBeDefined();
    expect(result!.error!.name).toMatch(/DeterminismViolationError|ReplayError/);
  });

  test('the gate bites: taskWorkflow with a timer added before its first activity, without patched(), fails on every release; behind patched() it passes', async () => {
    const scratch = path.join(ROOT, '.data', `replay-gate-${process.pid}`);
    const bundleWith = async (edit: (source: string) => string): Promise<string> => {
      rmSync(scratch, { recursive: true, force: true });
      // The workflow code and the prompt text it imports, copied together (activities are type-only imports).
      for (const folder of ['workflows', 'prompts'])
        cpSync(path.join(ROOT, folder), path.join(scratch, folder), { recursive: true });
      const file = path.join(scratch, 'workflows', 'task.ts');
      const source = readFileSync(file, 'utf8');
      const edited = edit(source);
      expect(edited).not.toBe(source);
      writeFileSync(file, edited);
      const { code } = await bundleWorkflowCode({
        workflowsPath: path.join(scratch, 'workflows', 'index.ts'),
        logger: quietLogger,
      });
      const codePath = path.join(scratch, `bundle-${Math.random().toString(36).slice(2)}.js`);
      mkdirSync(scratch, { recursive: true });
      writeFileSync(codePath, code);
      return codePath;
    };
    // The line before the task workflow's first activity (recordTask, or openTask on a fresh run).
    const firstActivity =
      "    const fresh = run.carry === undefined && run.state === 'pending' && (run.baseline || patched(OPEN_TASK_PATCH));";
    const taskHistories = histories.filter(
      (h) =>
        workflowType(h) === 'taskWorkflow' &&
        h.history.events.some((e) => e.eventType === 'EVENT_TYPE_ACTIVITY_TASK_SCHEDULED'),
    );
    const versions = [...new Set(taskHistories.map((h) => h.version))];
    expect(versions.length).toBeGreaterThan(1);
    try {
      const unpatched = await bundleWith((s) =>
        s.replace(firstActivity, `    await condition(() => false, 1);\n${firstActivity}`),
      );
      for (const version of versions) {
        const [result] = await replay([taskHistories.find((h) => h.version === version)!], unpatched);
        expect([version, result!.error?.name]).toEqual([
          version,
          expect.stringMatching(/DeterminismViolationError|ReplayError/),
        ]);
      }
      const guarded = await bundleWith((s) =>
        s.replace(
          firstActivity,
          `    if (patched('gate-test-timer')) await condition(() => false, 1);\n${firstActivity}`,
        ),
      );
      const results = await replay(taskHistories, guarded);
      expect(results.filter((r) => r.error)).toEqual([]);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 180_000);
});
