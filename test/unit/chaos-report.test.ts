import { renderReport } from '../../scripts/chaos/report';
import type { ChaosReport } from '../../scripts/chaos/run';

/** The chaos run's table shows how long each stalled provider stream stayed open before it was cut. */
describe("the chaos report's stall figures", () => {
  const report = (stalls: ChaosReport['stalls']): ChaosReport => ({
    options: { minutes: 3, agents: 50, seed: 1, dir: '/tmp/x', log: () => undefined },
    invariants: [],
    faults: [],
    tasks: 10,
    chats: 4,
    approvals: { decided: 2, refused: 0 },
    providerFaults: { stall: 3 },
    stalls,
    llmRequests: 100,
    apiRetries: 0,
    wallMs: 180_000,
  });

  test('stalled streams with the median and slowest cut, those never cut, and the idle cut', () => {
    const text = renderReport(report({ cutAfterMs: [120_400, 121_000, 125_900], neverCut: 1, idleCutMs: 120_000 }));
    expect(text).toContain('| provider stalls | cut after (median) | cut after (max) | never cut | idle cut |');
    expect(text).toContain('| 4 | 121.0 s | 125.9 s | 1 | 120.0 s |');
  });

  test('a run without a stall says n/a, not a number', () => {
    const text = renderReport(report({ cutAfterMs: [], neverCut: 0, idleCutMs: 120_000 }));
    expect(text).toContain('| 0 | n/a | n/a | 0 | 120.0 s |');
  });
});
