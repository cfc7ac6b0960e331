import { HEARTBEAT_OK } from '../workflows/rules/heartbeat-rules';
import {
  DREAM_ENTRY_PREVIEW_CHARS,
  DREAM_KNOWLEDGE_PREVIEW_CHARS,
  DREAM_MAX_MERGES,
  DREAM_MAX_PROMOTIONS,
  DREAM_MAX_REMOVALS,
  DREAM_PROMOTION_MIN_SOURCES,
  REFLECTION_NOTE_CHARS,
  REFLECTION_RESULT_SUMMARY_CHARS,
  REFLECTION_SKILL_MIN_STEPS,
} from '../workflows/rules/memory-limits';
import { renderLines, withTools } from '../activities/context/tool-mentions';
import type { KnowledgeSection, Observation } from '../activities/memory/store';

/**
 * The user prompts of the memory scenarios, as pure functions of the data the activities load:
 * heartbeat check-in, post-task reflection, daily report and dream.
 */

/** The checklist when the agent's HEARTBEAT.md is empty. */
export const DEFAULT_HEARTBEAT_CHECKLIST = '- Check assigned tasks with `task_list`';
/** The quality signal flags a revision rate above this. */
export const REVISION_RATE_ALERT = 0.3;
/** The last heartbeat's summary is a reminder, not a transcript. */
export const LAST_HEARTBEAT_SUMMARY_CHARS = 500;
/** Failed tasks listed for recovery; older failures are history. */
export const HEARTBEAT_FAILED_TASKS_MAX = 5;
/** Each failed task's error is cut to this. */
export const HEARTBEAT_ERROR_CHARS = 200;

export interface HeartbeatPromptInputs {
  now: string;
  checklist: string;
  lastHeartbeat?: { at: string; summary: string };
  goals: Array<{ title: string; status: string; currentIteration?: number; maxIterations?: number; criteria?: string }>;
  failedTasks: Array<{ id: string; title: string; error?: string | null }>;
  blockedTasks: Array<{ id: string; title: string }>;
  quality?: { reviewed: number; revised: number };
  /** The tools the heartbeat offers: guidance that names a tool appears only when it is offered. */
  tools: ReadonlySet<string>;
  /** A manager's report is due (after 20:00, none sent today): the section asks for it. */
  dailyReport?: { day: string; activity: string; maxWords: number; title: string };
}

export function heartbeatPrompt(i: HeartbeatPromptInputs): string {
  const lines = (...l: Parameters<typeof renderLines>[0][number][]) => renderLines(l, i.tools);
  const parts: string[] = [
    `[HEARTBEAT CHECK-IN] ${i.now}`,
    'This is your periodic check-in. Look over your work, deal with what is stuck, record what you learned, and report only what matters.',
    `## Your checklist\n${i.checklist.trim() || DEFAULT_HEARTBEAT_CHECKLIST}`,
    i.lastHeartbeat
      ? `## Last heartbeat (${i.lastHeartbeat.at})\n${i.lastHeartbeat.summary.slice(0, LAST_HEARTBEAT_SUMMARY_CHARS)}`
      : '## Last heartbeat\nNo earlier heartbeat with actions on record.',
  ];
  if (i.goals.length) {
    parts.push(
      [
        '## Active Goals',
        ...i.goals.map((g) => {
          const progress = g.maxIterations ? ` · iteration ${g.currentIteration ?? 0}/${g.maxIterations}` : '';
          return `- ${g.title} (${g.status}${progress})${g.criteria ? ` — done when: ${g.criteria}` : ''}`;
        }),
        'Assess progress on each goal and create follow-up tasks for the next step. Each check-in counts one iteration.',
        ...lines(withTools('goal_update', "When a goal's criteria are met, mark it completed with goal_update.")),
      ].join('\n'),
    );
  }
  if (i.failedTasks.length) {
    parts.push(
      [
        '## Failed tasks — recovery',
        ...i.failedTasks.map(
          (t) => `- ${t.id} "${t.title}"${t.error ? `: ${t.error.slice(0, HEARTBEAT_ERROR_CHARS)}` : ''}`,
        ),
        ...lines(
          'For each: find out why it failed.',
          withTools('task_get', 'task_get shows its notes, comments and last error.'),
          withTools('recall_activity', 'recall_activity finds what happened around it.'),
          withTools('task_create', 'If the cause is fixed or transient, create a follow-up task with task_create.'),
          withTools('notify_user', 'If it needs a human, tell them with notify_user.'),
          'Do not redo the work here.',
        ),
      ].join('\n'),
    );
  }
  if (i.dailyReport && i.tools.has('notify_user')) {
    parts.push(
      [
        '## Daily Report Required',
        `You have not reported on today (${i.dailyReport.day}) yet. Write the team's daily report, at most ${i.dailyReport.maxWords} words of markdown: what was done today, what is blocked or at risk, and what comes next.`,
        `Send it with notify_user, title "${i.dailyReport.title}". Report today only. Today's tasks:`,
        i.dailyReport.activity,
      ].join('\n'),
    );
  }
  if (i.blockedTasks.length) {
    parts.push(
      [
        '## Blocked tasks',
        ...i.blockedTasks.map((t) => `- ${t.id} "${t.title}"`),
        'Check whether what blocks them is resolved; if a human must act, ask them.',
      ].join('\n'),
    );
  }
  parts.push(
    [
      '## Self-evolution — knowledge lifecycle',
      'Decide where each thing you learned belongs:',
      ...lines(
        withTools(
          'memory_save',
          '- a one-off fact or outcome → memory_save (observation buffer; searchable, not in your prompt)',
        ),
        withTools(
          'memory_update',
          '- a convention or a pattern seen 3+ times → memory_update (curated knowledge, in every prompt; keep it short)',
        ),
        `- a procedure of ${REFLECTION_SKILL_MIN_STEPS}+ steps you will repeat → write it up as a skill`,
        withTools(
          'edit_agent_file',
          '- a lasting change to who you are or how you work → edit_agent_file, if you have that permission',
        ),
      ),
    ].join('\n'),
  );
  if (i.quality && i.quality.reviewed > 0) {
    const rate = i.quality.revised / i.quality.reviewed;
    const flag =
      rate > REVISION_RATE_ALERT
        ? ` That is above ${Math.round(REVISION_RATE_ALERT * 100)}%: look for what reviewers keep asking for and save it as knowledge.`
        : '';
    parts.push(
      `## Quality signal\n${i.quality.revised} of your last ${i.quality.reviewed} reviewed tasks needed a revision (${Math.round(rate * 100)}%).${flag}`,
    );
  }
  parts.push(
    [
      "## Patrol, don't build",
      '- Lightweight actions only: check status, update notes and the notebook, notify, create or update tasks.',
      ...lines(
        withTools(
          'task_create',
          '- Anything that takes real work (code, documents, research) becomes a task (task_create); do not do it in a heartbeat.',
        ),
        withTools(
          'task_create',
          '- Break a large piece of work into subtasks (parent_task_id) and order them with depends_on; they start by themselves.',
        ),
      ),
    ].join('\n'),
    [
      '## Communication',
      'Nobody sees your text output in a heartbeat.',
      ...lines(
        withTools(
          'notify_user',
          'Reach humans with notify_user (status, findings, alerts; related_task_id when it is about a task).',
        ),
        withTools(
          'request_user_approval',
          'A decision you need from a human goes to their inbox with request_user_approval; the answer does not come back within this run.',
        ),
        withTools('agent_send_message', 'Reach agents with agent_send_message.'),
        withTools('task_comment', 'Discuss a task in its thread with task_comment.'),
        withTools(
          'update_notebook',
          'Use update_notebook for priorities and blockers; do not store raw messages there.',
        ),
        withTools('clear_notebook', 'Remove stale notebook entries with clear_notebook.'),
      ),
      `If nothing needs attention, reply exactly ${HEARTBEAT_OK} and nothing else.`,
    ].join('\n'),
  );
  return parts.join('\n\n');
}

export interface ReflectionPromptInputs {
  taskId: string;
  title: string;
  rounds: number;
  durationMs: number;
  toolCalls: number;
  resultSummary: string;
  notes: string[];
}

export function reflectionPrompt(i: ReflectionPromptInputs): string {
  const revised = i.rounds > 1;
  const summary =
    i.resultSummary.length > REFLECTION_RESULT_SUMMARY_CHARS
      ? `${i.resultSummary.slice(0, REFLECTION_RESULT_SUMMARY_CHARS)}…`
      : i.resultSummary;
  const trace = [
    '## Execution trace',
    `- Rounds: ${i.rounds}${revised ? ` (${i.rounds - 1} revision${i.rounds > 2 ? 's' : ''})` : ''}`,
    `- Duration: ${formatDuration(i.durationMs)}`,
    `- Tool calls: ${i.toolCalls}`,
    `- Result summary: ${summary || '(none)'}`,
  ];
  if (i.notes.length) trace.push('- Recent notes:', ...i.notes.map((n) => `  - ${n.slice(0, REFLECTION_NOTE_CHARS)}`));
  const guidance = revised
    ? [
        '## Reflect on what went wrong',
        `The work needed ${i.rounds} rounds before it was accepted. What did the reviewer ask for that you missed? What would have got it right the first time? `,
        'Save the lesson so the next similar task is accepted on the first submission.',
      ]
    : [
        '## Reflect on what worked',
        'The work was accepted on the first submission. What approach, check or habit made it work? Save what you would do again.',
      ];
  return [
    `[POST-TASK REFLECTION — Task ${i.taskId}]`,
    `Your task "${i.title}" was accepted.`,
    trace.join('\n'),
    guidance.join('\n'),
    [
      '## Save what lasts',
      '- Specific lessons → memory_save with tags like ["insight", "domain:<topic>"].',
      '- Conventions and procedures you will reuse → memory_update (curated knowledge, kept short).',
      `- A procedure of ${REFLECTION_SKILL_MIN_STEPS} or more steps you are likely to repeat → turn it into a skill: write the numbered steps with memory_update under a section titled "Skill: <name>".`,
      'Save nothing if nothing new was learned. Use only memory tools; do not start new work. Finish with one line saying what you saved.',
    ].join('\n'),
  ].join('\n\n');
}

export function formatDuration(ms: number): string {
  const minutes = Math.max(0, Math.round(ms / 60_000));
  if (minutes < 1) return 'under a minute';
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} days ${hours % 24} h`;
}

export interface DailyReportInputs {
  day: string;
  tasksTouched: Array<{ title: string; state: string }>;
  tokensToday: number;
  previousReport?: { day: string; content: string };
}

/** Tasks listed in the daily report request; a report is 3–5 sentences, not a ledger. */
export const DAILY_REPORT_TASKS_MAX = 20;
/** Yesterday's report as context. */
export const DAILY_REPORT_PREVIOUS_CHARS = 1_500;

export function dailyReportPrompt(i: DailyReportInputs): string {
  const tasks = i.tasksTouched.length
    ? i.tasksTouched
        .slice(0, DAILY_REPORT_TASKS_MAX)
        .map((t) => `- ${t.title} (${t.state})`)
        .join('\n')
    : '- (no task activity today)';
  return [
    `[DAILY REPORT REQUEST] ${i.day}`,
    'Generate a brief daily status report. Include:',
    '1. What you worked on today (if anything)',
    '2. Current status and any blockers',
    '3. What you plan to work on next',
    `## Today's activity\n${tasks}\nTokens used today: ${i.tokensToday}`,
    i.previousReport
      ? `## Previous report (${i.previousReport.day})\n${i.previousReport.content.slice(0, DAILY_REPORT_PREVIOUS_CHARS)}`
      : '',
    'Keep the report concise (3-5 sentences). Do NOT use any tools.',
  ]
    .filter(Boolean)
    .join('\n\n');
}

export function dreamPrompt(entries: Observation[], total: number, knowledge: KnowledgeSection[]): string {
  const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim();
  const rows = entries.map((e) =>
    [
      e.id,
      e.createdAt.toISOString().slice(0, 16),
      e.type,
      e.tags.join(','),
      oneLine(e.content).slice(0, DREAM_ENTRY_PREVIEW_CHARS),
    ].join('|'),
  );
  const knowledgeText = knowledge
    .map((k) => `### ${k.title}\n${k.content}`)
    .join('\n\n')
    .slice(0, DREAM_KNOWLEDGE_PREVIEW_CHARS);
  return [
    '[MEMORY CONSOLIDATION — Dream Cycle]',
    'You are a memory consolidation assistant working on your own memory. Be conservative: keep rather than delete.',
    `## Memory Entries (${entries.length} most recent of ${total})\nid|timestamp|type|tags|content\n${rows.join('\n')}`,
    `## Existing knowledge (preview)\n${knowledgeText || '(none)'}`,
    [
      '## Instructions',
      'Reply with ONLY a JSON object, no prose:',
      '{"remove": ["<id>", …], "merge": [{"removeIds": ["<id>", …], "mergedContent": "…", "tags": ["…"]}], "promote": [{"sourceIds": ["<id>", …], "section": "<knowledge section title>", "content": "…"}]}',
      `- remove: entries that are stale, trivial or exact duplicates (at most ${DREAM_MAX_REMOVALS}).`,
      `- merge: two or more entries that say the same thing, replaced by one (at most ${DREAM_MAX_MERGES}).`,
      `- promote: ${DREAM_PROMOTION_MIN_SOURCES} or more entries showing a recurring pattern, distilled into a curated knowledge section (at most ${DREAM_MAX_PROMOTIONS}); the content is added to that section and the entries leave the buffer.`,
      'Use only ids listed above, each at most once. Empty arrays are fine. A plan that breaks these rules is discarded whole.',
    ].join('\n'),
  ].join('\n\n');
}

/** The flush request, sent as one user turn before compaction. */
export const MEMORY_FLUSH_PROMPT = [
  '[MEMORY FLUSH — System Request]',
  'The conversation context is approaching its limit and older messages will soon be summarised.',
  'Before that happens, use memory_save to persist what must not be lost:',
  '- key decisions or conclusions reached',
  '- important facts learned (names, paths, versions, constraints)',
  '- outcomes of work done and what is still open',
  '- technical details you will need again',
  'Use update_notebook for your current priorities and blockers. Save only what matters; then continue.',
].join('\n');
