import { createApprovalActivities } from '../../activities/approvals/activities';
import { createForkActivities } from '../../activities/fork/activities';
import { Kysely, PostgresDialect } from 'kysely';
import { Pool } from 'pg';
import { createActivities, type ActivityDeps } from '../../activities';
import { composeActivities, DuplicateActivityError } from '../../activities/compose';
import { createMailboxActivities } from '../../activities/mailbox/mailbox-activities';
import { createMemoryActivities } from '../../activities/memory/memory-activities';
import { createStepActivities } from '../../activities/step/step-activities';
import { createStreamActivities } from '../../activities/streams/stream-activities';
import { createSubagentActivities } from '../../activities/subagents';
import { createTaskActivities } from '../../activities/task-activities';
import type { Database } from '../../schema/database';

describe('composing the activity factories', () => {
  // The factories only close over their dependencies: nothing connects until an activity runs.
  const pool = new Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  const deps: ActivityDeps = {
    db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }),
    router: { candidates: () => [], chat: () => Promise.reject(new Error('no model in this test')) },
  };
  afterAll(() => deps.db.destroy());

  test('an activity name defined by two groups throws, naming both, instead of one replacing the other', () => {
    const first = {
      async recordTaskState() {
        return 'first';
      },
    };
    const second = {
      async recordTaskState() {
        return 'second';
      },
      async other() {
        return 0;
      },
    };
    expect(() => composeActivities({ tasks: first, mailbox: second })).toThrow(DuplicateActivityError);
    expect(() => composeActivities({ tasks: first, mailbox: second })).toThrow(
      "activity 'recordTaskState' is defined by both the 'tasks' and the 'mailbox' activities",
    );
  });

  test('distinct names compose into one namespace that keeps every function', async () => {
    const composed = composeActivities({
      a: {
        async one() {
          return 1;
        },
      },
      b: {
        async two() {
          return 2;
        },
      },
    });
    expect(Object.keys(composed).sort()).toEqual(['one', 'two']);
    expect(await composed.two()).toBe(2);
  });

  test("the worker's factories define no name twice: createActivities holds every activity of every group", () => {
    const groups = [
      createMemoryActivities,
      createStreamActivities,
      createMailboxActivities,
      createSubagentActivities,
      createStepActivities,
      createTaskActivities,
      createApprovalActivities,
      createForkActivities,
    ].map((factory) => Object.keys(factory(deps)));
    const activities = createActivities(deps);
    expect(Object.keys(activities).sort()).toEqual(groups.flat().sort());
    // The activities that moved out of index.ts into their groups are all still registered.
    const moved = [
      'llmStep',
      'llmStepWithTools',
      'executeTool',
      'recordApprovalRequest',
      'recordApprovalDecision',
      'taskStartGates',
      'recordTaskBlockers',
      'recordTaskApproval',
      'recordTaskState',
      'openTask',
      'loadTaskContext',
    ];
    expect(Object.keys(activities)).toEqual(expect.arrayContaining(moved));
  });
});
