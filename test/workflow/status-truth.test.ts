import { pauseSignal } from '../../workflows/contract';
import { eventually } from '../support/eventually';
import { useHarness } from '../support/harness';

/** The status says what is true now, while things change: a blocked task names its dependencies' current states. */
describe('status while things change', () => {
  const h = useHarness({
    beforeClose: async () => {
      h.llm.setResponder(undefined);
    },
  });
  beforeAll(async () => {
    // Every LLM call hangs: a started task stays in progress until it is paused.
    h.llm.setResponder(() => ({ kind: 'hang' }));
    await h.startWorker();
  });

  test("a blocked task's lastError follows its dependency's state at once (not at the 15-minute recheck)", async () => {
    const agentId = await h.createAgent();
    const { taskId: dependency, handle } = await h.client.startTask({
      agentId,
      title: 'Dependency',
      description: 'runs first',
    });
    await h.waitForStatus(dependency, (s) => s.state === 'in_progress');
    const { taskId: dependant } = await h.client.startTask({
      agentId,
      title: 'Dependant',
      description: 'waits',
      dependsOn: [dependency],
    });
    const blocked = await h.waitForStatus(dependant, (s) => s.state === 'blocked');
    expect(blocked.lastError).toBe(`waiting for ${dependency} (in_progress)`);

    await handle.signal(pauseSignal, { reason: 'lunch' });
    await h.waitForStatus(dependency, (s) => s.state === 'blocked');
    const updated = await h.waitForStatus(
      dependant,
      (s) => s.lastError === `waiting for ${dependency} (blocked)`,
      20_000,
    );
    expect(updated.state).toBe('blocked');
    // The stored row says the same (the CLI and the API read it once the workflow is gone).
    await eventually(
      async () => (await h.client.getTaskRow(dependant)).last_error === `waiting for ${dependency} (blocked)`,
      'the stored blocker',
    );
    for (const id of [dependant, dependency])
      await h.client
        .handle(id)
        .terminate('test finished')
        .catch(() => undefined);
  }, 60_000);
});
