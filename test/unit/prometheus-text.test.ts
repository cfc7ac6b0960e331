import { spawnSync } from 'node:child_process';
import { withCounterTotals } from '../../worker/prometheus-text';

/** What the Temporal runtime serves without `countersTotalSuffix` (trimmed from a real scrape). */
const RUNTIME_TEXT = [
  '# HELP temporal_request Count of client request successes by rpc name',
  '# TYPE temporal_request counter',
  'temporal_request{operation="Poll",service_name="temporal-core-sdk"} 3',
  '# HELP temporal_worker_start Count of the number of initialized workers',
  '# TYPE temporal_worker_start counter',
  'temporal_worker_start{namespace="default"} 1',
  '# HELP temporal_num_pollers Current number of active pollers per queue type',
  '# TYPE temporal_num_pollers gauge',
  'temporal_num_pollers{poller_type="workflow_task"} 2',
  '# HELP temporal_request_latency Histogram of client request latencies',
  '# TYPE temporal_request_latency histogram',
  'temporal_request_latency_bucket{operation="Poll",le="50"} 1',
  'temporal_request_latency_bucket{operation="Poll",le="+Inf"} 1',
  'temporal_request_latency_sum{operation="Poll"} 12',
  'temporal_request_latency_count{operation="Poll"} 1',
  '',
].join('\n');

const promtool = (text: string) => spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });

describe('withCounterTotals', () => {
  test('the runtime text fails promtool as served and passes once its counters end in _total', () => {
    expect(promtool(RUNTIME_TEXT).status).not.toBe(0);
    const text = withCounterTotals(RUNTIME_TEXT);
    expect([promtool(text).status, promtool(text).stdout + promtool(text).stderr]).toEqual([0, '']);
    expect(text).toContain('# TYPE temporal_request_total counter\ntemporal_request_total{operation="Poll"');
    // Gauges and histograms (whose samples are *_bucket, *_sum, *_count) keep their names.
    expect(text).toContain('temporal_num_pollers{poller_type="workflow_task"} 2');
    expect(text).toContain('temporal_request_latency_count{operation="Poll"} 1');
  });

  test('text already suffixed (a runtime with countersTotalSuffix) is unchanged', () => {
    const suffixed = withCounterTotals(RUNTIME_TEXT);
    expect(withCounterTotals(suffixed)).toBe(suffixed);
  });
});
