import { DependencyHealth, type DependencyName, type DependencyStatus } from '../../worker/health';

describe('DependencyHealth', () => {
  test('probes each dependency, reports every change of state once, and summarises ok / degraded', async () => {
    let postgresUp = true;
    const changes: Array<[DependencyName, DependencyStatus['state'], string | undefined]> = [];
    const health = new DependencyHealth({
      probes: {
        postgres: async () => {
          if (!postgresUp) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
        },
        temporal: async () => undefined,
      },
      onChange: (name, status) => changes.push([name, status.state, status.lastError]),
    });
    expect(health.snapshot()).toMatchObject({
      status: 'degraded',
      postgres: { state: 'starting' },
      temporal: { state: 'starting' },
    });

    expect(await health.probeAll()).toMatchObject({
      status: 'ok',
      postgres: { state: 'up' },
      temporal: { state: 'up' },
    });
    await health.probeAll(); // no change, no report
    postgresUp = false;
    const down = await health.probeAll();
    expect(down).toMatchObject({
      status: 'degraded',
      postgres: { state: 'down', lastError: 'connect ECONNREFUSED 127.0.0.1:5432' },
      temporal: { state: 'up' },
    });
    health.report('postgres', false, new Error('Connection terminated unexpectedly'));
    postgresUp = true;
    const back = await health.probeAll();
    expect(back.status).toBe('ok');
    expect(back.postgres.lastError).toBeUndefined();
    expect(changes.sort()).toEqual(
      [
        ['postgres', 'up', undefined],
        ['temporal', 'up', undefined],
        ['postgres', 'down', 'connect ECONNREFUSED 127.0.0.1:5432'],
        ['postgres', 'up', undefined],
      ].sort(),
    );
  });

  test('a probe that does not answer in time counts as down', async () => {
    jest.useFakeTimers();
    try {
      const health = new DependencyHealth({
        probes: { postgres: () => new Promise(() => undefined), temporal: async () => undefined },
      });
      const probing = health.probeAll();
      await jest.advanceTimersByTimeAsync(3_001);
      expect((await probing).postgres).toMatchObject({ state: 'down', lastError: 'no answer within 3000 ms' });
    } finally {
      jest.useRealTimers();
    }
  });
});
