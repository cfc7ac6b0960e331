/**
 * The evals page beside the inbox: recent evals, and for one eval its totals per candidate with a plot
 * of cost against pass rate (inline SVG: a person compares candidates at a glance), then the table per
 * task. Server-rendered, read-only, behind the same sign-in as the inbox; a person sees only the evals
 * of their organisation's tasks.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { formatVsOriginal, type CandidateTotals, type EvalRow } from '../activities/fork/graders';
import type { ForkClient } from '../client/forks';
import type { Kysely } from 'kysely';
import type { Database } from '../schema/database';
import { evalsOf, evalTableFor, refused } from './routes/evals';
import type { ApiPrincipal, TokenScope } from './tokens';

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const money = (n: number): string => `$${n.toFixed(4)}`;

/** The plot's size in CSS pixels, and the margin its axes' labels take. */
const PLOT = { width: 520, height: 300, margin: 48 };

/** Cost (x) against pass rate (y), one labelled point per candidate. */
export function costVsPassRateSvg(totals: readonly CandidateTotals[]): string {
  const { width, height, margin } = PLOT;
  const maxCost = Math.max(...totals.map((t) => t.costUsd), 1e-9);
  const x = (cost: number): number => margin + (cost / maxCost) * (width - 2 * margin);
  const y = (rate: number): number => height - margin - rate * (height - 2 * margin);
  const points = totals
    .map((t) => {
      const cx = x(t.costUsd).toFixed(1);
      const cy = y(t.passRate).toFixed(1);
      return `<circle cx="${cx}" cy="${cy}" r="6" fill="#2563eb"><title>${escape(t.candidate)}: ${Math.round(t.passRate * 100)}% at ${money(t.costUsd)}</title></circle><text x="${cx}" y="${(Number(cy) - 10).toFixed(1)}" text-anchor="middle" font-size="12">${escape(t.candidate)}</text>`;
    })
    .join('');
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="cost against pass rate per candidate" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">` +
    `<line x1="${margin}" y1="${height - margin}" x2="${width - margin}" y2="${height - margin}" stroke="#555"/>` +
    `<line x1="${margin}" y1="${margin}" x2="${margin}" y2="${height - margin}" stroke="#555"/>` +
    `<text x="${width / 2}" y="${height - 12}" text-anchor="middle" font-size="12">cost (USD, 0 to ${money(maxCost)})</text>` +
    `<text x="14" y="${height / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 14 ${height / 2})">pass rate</text>` +
    `<text x="${margin - 6}" y="${y(1) + 4}" text-anchor="end" font-size="11">100%</text><text x="${margin - 6}" y="${y(0) + 4}" text-anchor="end" font-size="11">0%</text>` +
    points +
    `</svg>`
  );
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title><style>
body{font-family:system-ui,sans-serif;margin:2rem;max-width:72rem}table{border-collapse:collapse;margin:1rem 0}td,th{border-bottom:1px solid #ddd;padding:.3rem .6rem;text-align:left;font-size:.9rem}
.pass{color:#166534}.fail{color:#991b1b}nav a{margin-right:1rem}</style></head><body><nav><a href="/inbox">Inbox</a><a href="/inbox/evals">Evals</a></nav><h1>${escape(title)}</h1>${body}</body></html>`;
}

function rowsTable(rows: readonly EvalRow[]): string {
  const head =
    '<tr><th>task</th><th>candidate</th><th>result</th><th>graders</th><th>iterations</th><th>tokens</th><th>cost</th><th>vs original</th><th>replayed / executed / refused</th></tr>';
  const body = rows
    .map((r) => {
      const result =
        r.state === 'graded'
          ? r.passed
            ? '<span class="pass">pass</span>'
            : '<span class="fail">fail</span>'
          : escape(r.state);
      const graders = r.grades
        .map((g) => `${g.passed ? '✓' : '✗'} ${escape(g.grader)}: ${escape(g.detail)}`)
        .join('<br>');
      return `<tr><td>${escape(r.sourceTaskId)}</td><td>${escape(r.candidate)}</td><td>${result}${r.incomplete ? `<br>${escape(r.incomplete)}` : ''}</td><td>${graders || escape(r.note ?? '')}</td><td>${r.fork?.iterations ?? '-'}</td><td>${r.fork?.tokens ?? '-'}</td><td>${money((r.fork?.costUsd ?? 0) + r.judgeCostUsd)}</td><td>${r.vsOriginal ? `${formatVsOriginal(r.vsOriginal.costUsd, '×')} cost` : '-'}</td><td>${r.calls.replayed} / ${r.calls.executed} / ${r.calls.refused}</td></tr>`;
    })
    .join('');
  return `<table>${head}${body}</table>`;
}

function totalsTable(totals: readonly CandidateTotals[]): string {
  const head =
    '<tr><th>candidate</th><th>pass rate</th><th>passed</th><th>cost</th><th>original cost</th><th>tokens</th><th>replayed</th><th>executed</th><th>refused</th><th>skipped</th></tr>';
  const body = totals
    .map(
      (t) =>
        `<tr><td>${escape(t.candidate)}</td><td>${Math.round(t.passRate * 100)}%</td><td>${t.passed}/${t.runs}</td><td>${money(t.costUsd)}</td><td>${money(t.originalCostUsd)}</td><td>${t.tokens}</td><td>${t.replayed}</td><td>${t.executed}</td><td>${t.refused}</td><td>${t.skipped}</td></tr>`,
    )
    .join('');
  return `<table>${head}${body}</table>`;
}

function sendPage(reply: FastifyReply, html: string): FastifyReply {
  return reply
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('x-frame-options', 'DENY')
    .header(
      'content-security-policy',
      "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'",
    )
    .send(html);
}

export function registerEvalPages(
  app: FastifyInstance,
  deps: {
    forks: ForkClient;
    db: Kysely<Database>;
    requireScope(principal: ApiPrincipal | undefined, scope: TokenScope): ApiPrincipal;
  },
): void {
  app.get('/inbox/evals', async (request, reply) => {
    const principal = deps.requireScope(request.principal, 'read');
    const evals = await evalsOf(deps.forks, deps.db, principal);
    const items = evals.map(
      (e) =>
        `<tr><td><a href="/inbox/evals/${encodeURIComponent(e.evalId)}">${escape(e.evalId)}</a></td><td>${escape(e.state)}</td><td>${escape(e.candidates.join(' vs '))}</td><td>${money(e.spentUsd)}</td><td>${escape(e.createdAt.toISOString())}</td></tr>`,
    );
    return sendPage(
      reply,
      page(
        'Evals',
        evals.length
          ? `<table><tr><th>eval</th><th>state</th><th>candidates</th><th>spent</th><th>started</th></tr>${items.join('')}</table>`
          : '<p>No eval yet: <code>npm run agents -- eval run</code>.</p>',
      ),
    );
  });
  app.get('/inbox/evals/:evalId', async (request, reply) => {
    const principal = deps.requireScope(request.principal, 'read');
    const { evalId } = request.params as { evalId: string };
    const t = await evalTableFor(deps.forks, deps.db, evalId, principal).catch(refused);
    const budget = t.budgetUsd !== null ? ` of ${money(t.budgetUsd)}` : '';
    return sendPage(
      reply,
      page(
        `Eval ${t.evalId}`,
        `<p>${escape(t.state)} · spent ${money(t.spentUsd)}${budget}</p>${costVsPassRateSvg(t.totals)}${totalsTable(t.totals)}<h2>Per task</h2>${rowsTable(t.rows)}`,
      ),
    );
  });
}
