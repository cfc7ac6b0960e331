/**
 * The run viewer's HTML: one page per task, server-rendered, no script. Every text that came from a
 * model, a tool or a person is HTML-escaped here (and had its secrets cut out in run-viewer-model.ts).
 */
import { trailLine } from '../activities/approvals/views';
import { formatTokens } from '../workflows/rules/format';
import type { TaskRow } from '../schema/database';
import {
  ARGS_SHOWN_CHARS,
  clip,
  RESULT_SHOWN_CHARS,
  type LlmCallView,
  type StepView,
  type ToolCallView,
} from './run-viewer-calls';
import type { ForkView } from './run-viewer-fork';
import type { RunView, SessionView } from './run-viewer-model';
import { SERIES_COLOURS, spendChartSvg, usd } from './spend-chart';

export interface RunPageLinks {
  /** The Temporal Web UI page of a workflow id. */
  workflow(workflowId: string): string;
  /** This viewer's page of another task. */
  run(taskId: string): string;
}

export interface RunPageExtras {
  /** The W3C trace id the task's workflow was started with, when tracing recorded one. */
  traceId?: string;
  /** Tasks forked from this one. */
  forks: Array<{ id: string; state: string }>;
}

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const ms = (n: number): string => (n < 1000 ? `${n} ms` : `${(n / 1000).toFixed(1)} s`);

export function runPage(task: TaskRow, view: RunView, links: RunPageLinks, extras: RunPageExtras): string {
  const a = (href: string, text: string, cls = '') =>
    `<a href="${escape(href)}"${cls ? ` class="${cls}"` : ''}${href.startsWith('/') ? '' : ' target="_blank" rel="noopener"'}>${escape(text)}</a>`;
  const budget = view.spend.limitUsd !== null ? ` of a ${usd(view.spend.limitUsd)} budget` : '';
  const head = `
<p class="facts"><span>task <code>${escape(task.id)}</code></span><span>agent <code>${escape(task.agent_id)}</code></span><span class="state">${escape(task.state)}</span><span>${view.rounds.length} round(s)</span><span data-llm-calls="${view.llmCallCount}">${view.llmCallCount} LLM call(s)</span><span>${view.toolCallCount} tool call(s)</span><span class="cost" data-total-cost-usd="${view.costUsd}">${usd(view.costUsd)} spent${budget}</span></p>
<p class="links">Temporal: ${a(links.workflow(view.taskWorkflowId), `task workflow ${view.taskWorkflowId}`, 'temporal')}${view.rounds.map((r) => ` · ${a(links.workflow(r.workflowId), `round ${r.round}`, 'temporal')}`).join('')} · trace ${extras.traceId ? `<code class="trace">${escape(extras.traceId)}</code>` : '<span class="muted">not recorded (tracing was off when it started)</span>'}</p>
${task.fork_of ? `<p class="fork-of">A fork of ${a(links.run(task.fork_of), task.fork_of)}: <a href="#fork">what differs, call by call</a>.</p>` : ''}
${extras.forks.length ? `<p class="forks">Forks of this task: ${extras.forks.map((f) => `${a(links.run(f.id), f.id)} (${escape(f.state)})`).join(', ')}</p>` : ''}
${task.result_summary ? `<blockquote class="words"><b>Submission:</b> ${escape(task.result_summary)}</blockquote>` : ''}
${task.last_error ? `<p class="problem">${escape(task.last_error)}</p>` : ''}`;
  const spend = `
<h2 id="spend">Spend</h2>
${view.spend.total.length ? spendChartSvg(view.spend) : '<p class="muted">No LLM call recorded yet.</p>'}
<table class="series"><tr><th></th><th>part of the tree</th><th>spent</th><th>its cap or grant</th></tr>
<tr><td><span class="swatch" style="background:#111827"></span></td><td>whole tree</td><td>${usd(view.spend.spentUsd)}</td><td>${view.spend.limitUsd !== null ? usd(view.spend.limitUsd) : 'no budget'}</td></tr>
${view.spend.series.map((s, i) => `<tr data-series="${escape(s.label)}"><td><span class="swatch" style="background:${SERIES_COLOURS[i % SERIES_COLOURS.length]}"></span></td><td>${escape(s.label)}</td><td>${usd(s.spentUsd)}</td><td>${s.limitUsd !== null ? usd(s.limitUsd) : '-'}</td></tr>`).join('')}
</table>`;
  const rounds = view.rounds
    .map(
      (r) => `
<section class="round" data-round="${r.round}">
<h2 id="round-${r.round}">Round ${r.round} <small>${usd(r.costUsd)} · ${a(links.workflow(r.workflowId), 'open in Temporal', 'temporal')}</small></h2>
${r.sessions.map((s) => sessionHtml(s, links, a)).join('\n')}
</section>`,
    )
    .join('\n');
  const others = view.others.length
    ? `<h2 id="others">Other runs for this task</h2>${view.others.map((s) => sessionHtml(s, links, a)).join('\n')}`
    : '';
  const fork = view.fork ? forkHtml(view.fork, links, a) : '';
  return page(`Run · ${task.title}`, `${head}${spend}${fork}${rounds}${others}`);
}

type Anchor = (href: string, text: string, cls?: string) => string;

function sessionHtml(s: SessionView, links: RunPageLinks, a: Anchor): string {
  const title =
    s.kind === 'sub-agent'
      ? `<h3 class="subagent">Sub-agent <code>${escape(s.workflowId ?? s.sessionId)}</code> <small>${usd(s.costUsd)}${s.workflowId ? ` · ${a(links.workflow(s.workflowId), 'open in Temporal', 'temporal')}` : ''}</small></h3>`
      : s.kind === 'other'
        ? `<h3>Session <code>${escape(s.sessionId)}</code> <small>${usd(s.costUsd)}</small></h3>`
        : '';
  return `<div class="session" data-session="${escape(s.sessionId)}">${title}${s.steps.map(stepHtml).join('\n') || '<p class="muted">No step yet.</p>'}</div>`;
}

function stepHtml(step: StepView): string {
  const truncated = step.truncations.length
    ? `<p class="truncated">Prompt cut to fit: ${step.truncations.map((t) => `${escape(t.segment)} ${formatTokens(t.originalTokens)} → ${formatTokens(t.keptTokens)} tokens`).join('; ')}</p>`
    : '';
  const llm = step.llmCalls.length
    ? `<table class="llm"><tr><th>LLM call</th><th>prompt</th><th>cache read</th><th>cache write</th><th>output</th><th>cost</th><th>latency</th><th>stop</th></tr>${step.llmCalls.map(llmRow).join('')}</table>`
    : step.copied
      ? ''
      : '<p class="muted">No LLM call recorded for this step.</p>';
  const tools = step.tools.length
    ? `<table class="tools"><tr><th>tool call</th><th>arguments</th><th>result</th><th>ledger</th><th>sandbox</th><th>approval</th></tr>${step.tools.map(toolRow).join('')}</table>`
    : '';
  return `<article class="step${step.copied ? ' copied' : ''}" data-step="${escape(step.key)}">
<h4>${escape(step.label)}</h4>${step.text ? `<p class="words">${escape(step.text)}</p>` : ''}${truncated}${llm}${tools}</article>`;
}

function llmRow(c: LlmCallView): string {
  const name = c.purpose === 'step' ? escape(c.model) : `${escape(c.model)} <small>(${escape(c.purpose)})</small>`;
  return `<tr class="llm-call" data-llm-call="${escape(c.id)}" data-cost-usd="${c.costUsd}" data-stop="${escape(c.stopReason ?? '')}">
<td>${name} <small>${escape(c.provider)}</small></td>
<td title="uncached ${c.inputTokens}">${formatTokens(c.promptTokens)}</td><td>${formatTokens(c.cacheReadTokens)}</td><td>${formatTokens(c.cacheWriteTokens)}</td><td>${formatTokens(c.outputTokens)}</td>
<td>${usd(c.costUsd)}</td><td>${ms(c.durationMs)}</td><td>${escape(c.stopReason ?? '-')}${c.error ? ` <span class="error">${escape(c.error)}</span>` : ''}</td></tr>`;
}

function folded(text: string, shown: number): string {
  if (text.length <= shown) return `<pre>${escape(text)}</pre>`;
  return `<details><summary><pre>${escape(clip(text, shown))}</pre></summary><pre>${escape(text)}</pre></details>`;
}

function toolRow(t: ToolCallView): string {
  const sandbox = t.sandbox
    .map(
      (s) =>
        `<div class="sandbox${s.limit ? ' limit' : ''}"><code>${escape(clip(s.command, 60))}</code>: ${escape(s.status)}, ${ms(s.durationMs)}${s.truncated ? ', output truncated' : ''}</div>`,
    )
    .join('');
  const approval = t.approval
    ? `<div class="approval" data-approval="${escape(t.approval.status)}"><b>${escape(t.approval.status)}</b>${t.approval.decidedBy ? ` by ${escape(t.approval.decidedBy)}` : ''}${t.approval.comment ? `: ${escape(t.approval.comment)}` : ''}${
        t.approval.events.length
          ? `<ol>${t.approval.events.map((e) => `<li>${escape(trailLine(e))}</li>`).join('')}</ol>`
          : `<ol><li>${escape(t.approval.requestedAt.toISOString().slice(11, 19))} asked</li>${t.approval.decidedAt ? `<li>${escape(t.approval.decidedAt.toISOString().slice(11, 19))} ${escape(t.approval.status)}${t.approval.decidedBy ? ` by ${escape(t.approval.decidedBy)}` : ''}</li>` : ''}</ol>`
      }</div>`
    : '';
  const more = t.resultChars > t.result.length ? ` <small>(${t.resultChars} chars in all)</small>` : '';
  return `<tr class="tool-call${t.isError ? ' is-error' : ''}" data-tool-call="${escape(t.toolCallId)}" data-tool="${escape(t.tool)}" data-ledger="${t.ledger}">
<td><b>${escape(t.tool)}</b>${t.isError ? ' <span class="error">error</span>' : ''}</td>
<td>${folded(t.args, ARGS_SHOWN_CHARS)}</td><td>${t.result ? folded(t.result, RESULT_SHOWN_CHARS) : '<span class="muted">none</span>'}${more}${t.redactions ? `<small>${t.redactions} secret value(s) redacted</small>` : ''}</td>
<td><span class="ledger ledger-${t.ledger.replace(' ', '-')}">${t.ledger}</span><br><small>${escape(t.ledgerNote)}</small></td>
<td>${sandbox || '<span class="muted">-</span>'}</td><td>${approval || '<span class="muted">-</span>'}</td></tr>`;
}

function forkHtml(fork: ForkView, links: RunPageLinks, a: Anchor): string {
  const overrides = Object.keys(fork.overrides).length
    ? `<pre>${escape(JSON.stringify(fork.overrides, null, 2))}</pre>`
    : '<span class="muted">none</span>';
  const stepRows = fork.steps
    .map(
      (s) =>
        `<tr data-fork-step="${s.step}"><td>${s.step}</td><td>${s.source ? `${escape(s.source.model)} · ${usd(s.source.costUsd)} · ${escape(s.source.stopReason ?? '-')}<br><small>${escape(s.source.tools.join(', ') || 'no calls')}</small>` : '-'}</td><td>${s.fork ? `${escape(s.fork.model)} · ${usd(s.fork.costUsd)} · ${escape(s.fork.stopReason ?? '-')}<br><small>${escape(s.fork.tools.join(', ') || 'no calls')}</small>` : '-'}</td><td class="verdict">${escape(s.verdict)}</td></tr>`,
    )
    .join('');
  const side = (t: ToolCallView | undefined) =>
    t
      ? `<b>${escape(t.tool)}</b> <code>${escape(clip(t.args, 80))}</code><br><small>${escape(clip(t.result, 80))}</small><br><span class="ledger ledger-${t.ledger.replace(' ', '-')}">${t.ledger}</span>`
      : '<span class="muted">-</span>';
  const callRows = fork.calls
    .map(
      (c) =>
        `<tr data-fork-call="${c.position}" data-outcome="${escape(c.outcome ?? '')}"><td>${c.position}</td><td>${side(c.source)}</td><td>${side(c.fork)}</td><td>${escape(c.outcome ?? '-')}${c.note ? `<br><small>${escape(c.note)}</small>` : ''}</td><td class="verdict">${escape(c.verdict)}</td></tr>`,
    )
    .join('');
  return `
<h2 id="fork">Fork of ${a(links.run(fork.sourceTaskId), fork.sourceTaskId)} at step ${fork.atStep}</h2>
<p>Overrides: ${overrides}${fork.allowTools.length ? ` Allowed tools: ${escape(fork.allowTools.join(', '))}.` : ''}</p>
<p class="muted">${escape(fork.workspaceNote)}</p>
<h3>LLM steps</h3>
<table class="fork-steps"><tr><th>step</th><th>source</th><th>fork</th><th>what differs</th></tr>${stepRows}</table>
<h3>Tool calls</h3>
<table class="fork-calls"><tr><th>#</th><th>source</th><th>fork</th><th>fork's outcome</th><th>what differs</th></tr>${callRows}</table>`;
}

const PAGE_STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
main{max-width:1180px;margin:0 auto;padding:20px 24px}
nav a{margin-right:1rem;color:#3451b2} h1{font-size:22px;margin:10px 0 4px} h2{font-size:18px;margin:26px 0 8px} h2 small,h3 small{font-weight:400;color:#667;font-size:13px}
h3{font-size:15px;margin:16px 0 6px} h4{font-size:13px;margin:0 0 4px;color:#445}
.facts span{margin-right:14px} .state{font-weight:600;text-transform:uppercase;font-size:12px;color:#3451b2}
.links,.fork-of,.forks{margin:4px 0} a{color:#3451b2} code{font-size:12px}
.muted{color:#778} .problem{background:#fdecea;border:1px solid #f3b9b4;padding:6px 10px;border-radius:6px}
blockquote.words,p.words{margin:4px 0 8px;padding:4px 10px;border-left:3px solid #c9cfdb;white-space:pre-wrap;color:#333}
.step{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:10px 12px;margin:0 0 10px}
.step.copied{background:#f9fafb;border-style:dashed}
table{border-collapse:collapse;width:100%;margin:4px 0;background:#fff} th,td{border-bottom:1px solid #e5e7eb;padding:4px 6px;text-align:left;vertical-align:top;font-size:12.5px}
th{color:#556;font-weight:600;background:#f9fafb}
pre{margin:0;white-space:pre-wrap;word-break:break-word;font-size:12px;max-width:380px}
details summary{cursor:pointer;list-style:none} details[open] summary{display:none}
.ledger{display:inline-block;padding:1px 6px;border-radius:10px;font-size:11.5px;font-weight:600}
.ledger-committed{background:#dcfce7;color:#166534}.ledger-interrupted{background:#fef3c7;color:#92400e}
.ledger-not-run{background:#e5e7eb;color:#374151}.ledger-running,.ledger-waiting{background:#dbeafe;color:#1e40af}
.error{color:#b91c1c;font-weight:600} tr.is-error td:first-child{border-left:3px solid #ef4444}
.sandbox{font-size:12px}.sandbox.limit{color:#92400e;font-weight:600}
.approval ol{margin:2px 0;padding-left:18px;font-size:12px}
.truncated{color:#92400e;font-size:12px;margin:2px 0}
.subagent{border-top:1px dashed #c9cfdb;padding-top:8px}
.spend-chart{background:#fff;border:1px solid #dde1e8;border-radius:8px;max-width:100%}
table.series{width:auto} .swatch{display:inline-block;width:14px;height:4px;vertical-align:middle}
.verdict{font-weight:600}
`;

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escape(title)} · durable-agents</title><style>${PAGE_STYLE}</style></head><body><main><nav><a href="/inbox">Inbox</a><a href="/inbox/evals">Evals</a></nav><h1>${escape(title)}</h1>${body}</main></body></html>`;
}
