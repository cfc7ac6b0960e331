import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import { PRIORITY_RANK as PRIORITY_RANK_SQL } from '../../activities/store/task-graph';
import type { Database } from '../../schema/database';
import { TASK_PRIORITIES as CONTRACT_PRIORITIES } from '../../workflows/contract';
import {
  NOTIFICATION_PRIORITIES,
  PRIORITY_RANK,
  promptPriority,
  TASK_PRIORITIES,
} from '../../workflows/rules/priority';

describe('one priority vocabulary (workflows/rules/priority.ts)', () => {
  test('the contract exposes the one task scale', () => {
    expect(CONTRACT_PRIORITIES).toBe(TASK_PRIORITIES);
    expect(TASK_PRIORITIES).toEqual(['low', 'medium', 'high', 'urgent']);
  });

  test('a stored value maps to the prompt scale: known levels as they are, anything else as medium', () => {
    expect(TASK_PRIORITIES.map(promptPriority)).toEqual(['low', 'medium', 'high', 'urgent']);
    expect(promptPriority('critical')).toBe('critical');
    expect(['', 'URGENT', 'p1', 'normal'].map(promptPriority)).toEqual(['medium', 'medium', 'medium', 'medium']);
  });

  test("the board's SQL order is the rank table: urgent and critical first, low and unknown values last", () => {
    const db = new Kysely<Database>({
      dialect: {
        createAdapter: () => new PostgresAdapter(),
        createDriver: () => new DummyDriver(),
        createIntrospector: (k) => new PostgresIntrospector(k),
        createQueryCompiler: () => new PostgresQueryCompiler(),
      },
    });
    const { sql, parameters } = db.selectFrom('tasks').select('id').orderBy(PRIORITY_RANK_SQL).compile();
    expect(sql).toBe(
      `select "id" from "tasks" order by case priority when 'critical' then 0 when 'urgent' then 0 when 'high' then 1 when 'medium' then 2 else 3 end`,
    );
    expect(parameters).toEqual([]);
    expect(PRIORITY_RANK.low).toBe(3);
  });

  test('notifications keep their own four words', () => {
    expect(NOTIFICATION_PRIORITIES).toEqual(['low', 'normal', 'high', 'urgent']);
  });
});
