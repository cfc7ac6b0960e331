/**
 * A task tree's spend over time as an inline SVG, drawn on the server (the run viewer has no script):
 * the whole tree's cumulative spend as a thick step line, one thinner line per part of the tree (the
 * task's own rounds, each sub-agent, each subtask's subtree), and the budget as a dashed line. Pure.
 */
import type { SpendView } from './run-viewer-spend';

/** The chart's size in CSS pixels and the room its axis labels take. */
const CHART = { width: 760, height: 280, left: 72, right: 24, top: 20, bottom: 40 };
/** Line colours for the parts of the tree, in turn (readable on white, told apart in grey too). */
export const SERIES_COLOURS = ['#2563eb', '#d97706', '#059669', '#7c3aed', '#db2777', '#0891b2', '#65a30d'];
/** The budget line's colour. */
const BUDGET_COLOUR = '#dc2626';
/** Headroom above the highest figure, so the top line is not drawn on the frame. */
const HEADROOM = 1.1;

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** $0.000123 under a cent (a cheap call is not free), $0.1234 above. */
export function usd(amount: number): string {
  if (amount === 0) return '$0';
  return amount < 0.01 ? `$${amount.toFixed(6)}` : `$${amount.toFixed(4)}`;
}

export function spendChartSvg(spend: SpendView): string {
  const { width, height, left, right, top, bottom } = CHART;
  const times = spend.total.map((p) => p.at.getTime());
  const start = Math.min(...times, Date.now());
  const end = Math.max(...times, start + 1);
  const maxUsd = Math.max(spend.spentUsd, spend.limitUsd ?? 0, 1e-9) * HEADROOM;
  const x = (t: number): number => left + ((t - start) / (end - start)) * (width - left - right);
  const y = (v: number): number => height - bottom - (v / maxUsd) * (height - top - bottom);
  /** A cumulative series as a step line: flat until each call, then up by its cost. */
  const stepPath = (points: ReadonlyArray<{ at: Date; totalUsd: number }>): string => {
    let d = `M${x(start).toFixed(1)} ${y(0).toFixed(1)}`;
    for (const p of points) d += ` H${x(p.at.getTime()).toFixed(1)} V${y(p.totalUsd).toFixed(1)}`;
    return `${d} H${x(end).toFixed(1)}`;
  };
  const parts = spend.series
    .map(
      (s, i) =>
        `<path d="${stepPath(s.points)}" fill="none" stroke="${SERIES_COLOURS[i % SERIES_COLOURS.length]}" stroke-width="1.5" data-series="${escape(s.label)}"><title>${escape(s.label)}: ${usd(s.spentUsd)}</title></path>`,
    )
    .join('');
  const total = `<path d="${stepPath(spend.total)}" fill="none" stroke="#111827" stroke-width="3" data-series="total"><title>whole tree: ${usd(spend.spentUsd)}</title></path>`;
  const budget =
    spend.limitUsd !== null
      ? `<line x1="${left}" x2="${width - right}" y1="${y(spend.limitUsd).toFixed(1)}" y2="${y(spend.limitUsd).toFixed(1)}" stroke="${BUDGET_COLOUR}" stroke-dasharray="6 4" data-budget="${spend.limitUsd}"/>` +
        `<text x="${width - right}" y="${(y(spend.limitUsd) - 5).toFixed(1)}" text-anchor="end" font-size="11" fill="${BUDGET_COLOUR}">budget ${usd(spend.limitUsd)}</text>`
      : '';
  const axisTime = (t: number) => new Date(t).toISOString().slice(11, 19);
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="spend over time against the budget" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" class="spend-chart">` +
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#fff"/>` +
    `<line x1="${left}" y1="${height - bottom}" x2="${width - right}" y2="${height - bottom}" stroke="#6b7280"/>` +
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${height - bottom}" stroke="#6b7280"/>` +
    `<text x="${left - 6}" y="${y(0) + 4}" text-anchor="end" font-size="11">$0</text>` +
    `<text x="${left - 6}" y="${(y(maxUsd / HEADROOM) + 4).toFixed(1)}" text-anchor="end" font-size="11">${usd(maxUsd / HEADROOM)}</text>` +
    `<text x="${left}" y="${height - bottom + 16}" font-size="11">${axisTime(start)} UTC</text>` +
    `<text x="${width - right}" y="${height - bottom + 16}" text-anchor="end" font-size="11">${axisTime(end)} UTC</text>` +
    `<text x="${(left + width - right) / 2}" y="${height - 6}" text-anchor="middle" font-size="12">time (each step: one LLM call's cost)</text>` +
    budget +
    parts +
    total +
    `</svg>`
  );
}
