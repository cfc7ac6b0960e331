/**
 * Prometheus text exposition served by another component, re-exported so `promtool check metrics`
 * accepts it. Pure: no I/O, shared by the worker's and the API's `/metrics/temporal`.
 */

const METRIC_NAME = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(.*)$/;

/**
 * Names every counter family `<name>_total` (its HELP, TYPE and sample lines), as Prometheus'
 * conventions and promtool ask. The Temporal runtime writes its counters without the suffix unless
 * told (`countersTotalSuffix`), so an endpoint from any worker, configured or not, comes out the same.
 * Families already ending in `_total` and every other line are left as they are.
 *
 * @example withCounterTotals('# TYPE temporal_request counter\ntemporal_request{operation="Poll"} 3\n')
 * // '# TYPE temporal_request_total counter\ntemporal_request_total{operation="Poll"} 3\n'
 */
export function withCounterTotals(text: string): string {
  const counters = new Set<string>();
  for (const match of text.matchAll(/^# TYPE (\S+) counter\s*$/gm))
    if (!match[1]!.endsWith('_total')) counters.add(match[1]!);
  if (counters.size === 0) return text;
  return text
    .split('\n')
    .map((line) => {
      const meta = /^# (HELP|TYPE) (\S+)(.*)$/.exec(line);
      if (meta) return counters.has(meta[2]!) ? `# ${meta[1]} ${meta[2]}_total${meta[3]}` : line;
      const sample = METRIC_NAME.exec(line);
      return sample && counters.has(sample[1]!) ? `${sample[1]}_total${sample[2]}` : line;
    })
    .join('\n');
}
