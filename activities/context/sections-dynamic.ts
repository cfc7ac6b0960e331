/**
 * Tier 3 (dynamic) sections: everything that may change from call to call, kept small and quantised
 * so it churns as little as possible. `shrinkOrder` says which sections give way first when
 * the whole system message is over its 12,000-token target.
 */
import {
  NOTEBOOK_MAX_CHARS_PER_ENTRY,
  RECENT_ACTIVITY_DETAIL_CHARS,
  RECENT_ACTIVITY_MAX_EVENTS,
  RECENT_ACTIVITY_MAX_TOKENS,
  RECENT_RUNS_MAX,
  RECENT_RUNS_MAX_TOKENS,
  RECENT_RUN_SUMMARY_CHARS,
  SKILL_CATALOGUE_DESC_CHARS,
  SKILL_KEYWORD_MIN_CHARS,
  SYSTEM_MAILBOX_DECISIONS_MAX,
  SYSTEM_MAILBOX_ITEM_PREVIEW_CHARS,
  SYSTEM_MAILBOX_MERGED_CHARS,
  SYSTEM_MAILBOX_QUEUE_ITEMS_MAX,
  SYSTEM_MY_TASKS_MAX,
  SYSTEM_SKILLS_CATALOGUE_MAX,
  SYSTEM_TASK_DESC_CHARS,
  SYSTEM_TEAM_TASKS_MAX,
} from './limits';
import { fence, inline, neutralize, truncateChars } from './neutralize';
import type { PromptInputs, PromptScenario, PromptTask, SkillSummary } from './prompt-types';
import { formatMinuteUtc, mailboxElapsedLabel, notebookAgeLabel } from './quantize';
import type { SegmentDraft } from './segment-fit';
import { mention, offeredToolNames } from './tool-mentions';
import { PRIORITY_RANK } from '../../workflows/rules/priority';

/** Shrink order when the message is over target: lowest first. Undefined (sender, time…) never shrinks. */
const SHRINK_ORDER = {
  recent_activity: 1,
  recent_runs: 2,
  team_status: 3,
  skills_catalogue: 4,
  announcements: 5,
  notebook: 6,
  task_board: 7,
  attention: 8,
} as const;

export function tier3Drafts(inputs: PromptInputs): SegmentDraft[] {
  const drafts: Array<SegmentDraft | undefined> = [
    listSection('announcements', '## System Announcements', inputs.announcements),
    notebookSection(inputs),
    skillsCatalogueSection(inputs),
    taskBoardSection(inputs),
    teamStatusSection(inputs),
    recentActivitySection(inputs),
    recentRunsSection(inputs),
    attentionSection(inputs),
    senderSection(inputs),
    availableToolsSection(inputs),
  ];
  return drafts.filter((d): d is SegmentDraft => d !== undefined);
}

function listSection(name: 'announcements', heading: string, entries: string[] | undefined): SegmentDraft | undefined {
  const items = entries?.filter((e) => e.trim()).map((e) => `- ${neutralize(e.trim())}`);
  if (!items?.length) return undefined;
  return { name, tier: 3, heading, items, dropFrom: 'start', separator: '\n', shrinkOrder: SHRINK_ORDER[name] };
}

/** Notebook entries with key, managed tag and quantised age. */
function notebookSection(inputs: PromptInputs): SegmentDraft | undefined {
  const entries = inputs.notebook?.filter((e) => e.content.trim());
  if (!entries?.length) return undefined;
  const items = entries.map(
    (e) =>
      `### ${inline(e.key, 120)} [${e.tag}, ${notebookAgeLabel(e.updatedAt, inputs.now)}]\n${neutralize(truncateChars(e.content.trim(), NOTEBOOK_MAX_CHARS_PER_ENTRY))}`,
  );
  return {
    name: 'notebook',
    tier: 3,
    heading: '## Notebook',
    items,
    dropFrom: 'start',
    separator: '\n\n',
    shrinkOrder: SHRINK_ORDER.notebook,
  };
}

/** The query's keywords: lowercase words longer than 2 characters. */
export function relevanceKeywords(query: string | undefined): Set<string> {
  return new Set(
    (query ?? '')
      .toLowerCase()
      .split(/[^\p{L}\p{N}_-]+/u)
      .filter((w) => w.length >= SKILL_KEYWORD_MIN_CHARS),
  );
}

/** How many of the keywords appear as words of the skill's name, category or description. */
export function relevanceScore(skill: SkillSummary, keywords: ReadonlySet<string>): number {
  const words = new Set(
    `${skill.name} ${skill.category ?? ''} ${skill.description}`.toLowerCase().split(/[^\p{L}\p{N}_-]+/u),
  );
  let score = 0;
  for (const keyword of keywords) if (words.has(keyword)) score += 1;
  return score;
}

/** Keyword-overlap relevance (query words of ≥ 3 chars), stable for ties, top 30. */
export function filterSkillsByRelevance<T extends SkillSummary>(
  skills: readonly T[],
  query: string | undefined,
  max = SYSTEM_SKILLS_CATALOGUE_MAX,
): T[] {
  const keywords = relevanceKeywords(query);
  if (keywords.size === 0) return skills.slice(0, max);
  const scored = skills.map((skill, index) => ({ skill, index, score: relevanceScore(skill, keywords) }));
  scored.sort((a, b) => b.score - a.score || a.index - b.index);
  return scored.slice(0, max).map((s) => s.skill);
}

function skillsCatalogueSection(inputs: PromptInputs): SegmentDraft | undefined {
  const all = inputs.skills ?? [];
  if (!all.length) return undefined;
  const shown = filterSkillsByRelevance(all, inputs.skillQuery);
  const items = shown.map((s) => {
    const category = s.category ? ` [${inline(s.category, 40)}]` : '';
    return `- **${inline(s.name, 80)}**${category}: ${inline(s.description, SKILL_CATALOGUE_DESC_CHARS)}`;
  });
  const hidden = all.length - shown.length;
  const offered = offeredToolNames(inputs);
  return {
    name: 'skills_catalogue',
    tier: 3,
    heading: `## Available Skills${mention(offered, 'discover_tools', ' (activate with discover_tools)')}`,
    items,
    dropFrom: 'end',
    separator: '\n',
    ...(hidden > 0
      ? { footer: `(${hidden} more skills${mention(offered, 'discover_tools', ': search them with discover_tools')})` }
      : {}),
    shrinkOrder: SHRINK_ORDER.skills_catalogue,
  };
}

const CLOSED_STATUSES = new Set(['completed', 'done', 'cancelled', 'canceled', 'rejected', 'archived', 'closed']);

function byPriority(tasks: readonly PromptTask[]): PromptTask[] {
  return tasks
    .map((task, index) => ({ task, index }))
    .sort((a, b) => (PRIORITY_RANK[a.task.priority] ?? 4) - (PRIORITY_RANK[b.task.priority] ?? 4) || a.index - b.index)
    .map((t) => t.task);
}

/** Lightweight scenarios skip heavy context such as the task board (heartbeats use task_list). */
export const LIGHTWEIGHT_SCENARIOS: ReadonlySet<PromptScenario> = new Set(['heartbeat', 'a2a', 'comment_response']);

/** My top 15 and the team's top 10 open tasks by priority; closed ones only as a count. */
function taskBoardSection(inputs: PromptInputs): SegmentDraft | undefined {
  const board = inputs.tasks;
  if (!board || LIGHTWEIGHT_SCENARIOS.has(inputs.scenario)) return undefined;
  const isOpen = (t: PromptTask) => !CLOSED_STATUSES.has(t.status.toLowerCase());
  const mine = byPriority(board.mine.filter(isOpen));
  const team = byPriority((board.team ?? []).filter(isOpen));
  const closed =
    (board.myClosedTotal ?? board.mine.filter((t) => !isOpen(t)).length) +
    (board.team ?? []).filter((t) => !isOpen(t)).length;
  const myOpen = Math.max(board.myOpenTotal ?? 0, mine.length);
  if (!mine.length && !team.length && closed === 0) return undefined;

  const items: string[] = [];
  const listHint = mention(offeredToolNames(inputs), 'task_list', ': use task_list for the full list');
  const myLines = mine.slice(0, SYSTEM_MY_TASKS_MAX).map((t) => {
    const description = t.description?.trim() ? ` — ${inline(t.description, SYSTEM_TASK_DESC_CHARS)}` : '';
    return `- [${t.priority}] ${inline(t.title, 200)} (id ${inline(t.id, 80)}, ${inline(t.status, 40)})${description}`;
  });
  const shownMine = Math.min(mine.length, SYSTEM_MY_TASKS_MAX);
  if (myOpen > shownMine) myLines.push(`- …${myOpen - shownMine} more${listHint}`);
  items.push(`### My active tasks (${myOpen})\n${myLines.join('\n') || '- none'}`);
  if (team.length) {
    const teamLines = team.slice(0, SYSTEM_TEAM_TASKS_MAX).map((t) => {
      const assignee = t.assignee ? `, assignee ${inline(t.assignee, 80)}` : '';
      return `- [${t.priority}] ${inline(t.title, 200)} (id ${inline(t.id, 80)}${assignee})`;
    });
    if (team.length > SYSTEM_TEAM_TASKS_MAX)
      teamLines.push(`- …${team.length - SYSTEM_TEAM_TASKS_MAX} more${listHint}`);
    items.push(`### Team tasks (${team.length})\n${teamLines.join('\n')}`);
  }
  const footer =
    closed > 0
      ? `Completed or closed tasks: ${closed}${mention(offeredToolNames(inputs), 'task_list', ' (task_list shows them)')}.`
      : undefined;
  return {
    name: 'task_board',
    tier: 3,
    heading: '## Task Board',
    items,
    dropFrom: 'end',
    separator: '\n\n',
    fenceSource: 'task-board',
    ...(footer ? { footer } : {}),
    shrinkOrder: SHRINK_ORDER.task_board,
  };
}

function teamStatusSection(inputs: PromptInputs): SegmentDraft | undefined {
  const members = inputs.teamStatus;
  if (!members?.length) return undefined;
  return {
    name: 'team_status',
    tier: 3,
    heading: '## Team Status',
    items: members.map((m) => `- ${inline(m.name, 80)}: ${inline(m.status, 120)}`),
    dropFrom: 'end',
    separator: '\n',
    shrinkOrder: SHRINK_ORDER.team_status,
  };
}

/** The last 20 activity events of the scope, ≤ 1,200 tokens, oldest dropped first. */
function recentActivitySection(inputs: PromptInputs): SegmentDraft | undefined {
  const events = inputs.recentActivity?.slice(-RECENT_ACTIVITY_MAX_EVENTS);
  if (!events?.length) return undefined;
  const items = events.map((e) => {
    const actor = e.actor ? ` (${inline(e.actor, 80)})` : '';
    return `- ${formatMinuteUtc(e.at)} ${inline(e.type, 60)}${actor}: ${inline(e.detail, RECENT_ACTIVITY_DETAIL_CHARS)}`;
  });
  return {
    name: 'recent_activity',
    tier: 3,
    heading: '## Recent Activity (UTC, oldest first)',
    items,
    dropFrom: 'start',
    separator: '\n',
    fenceSource: 'activity-log',
    maxTokens: RECENT_ACTIVITY_MAX_TOKENS,
    shrinkOrder: SHRINK_ORDER.recent_activity,
  };
}

/** Compact JSON of the last 5 runs, ≤ 800 tokens. */
function recentRunsSection(inputs: PromptInputs): SegmentDraft | undefined {
  const runs = inputs.recentRuns?.slice(-RECENT_RUNS_MAX);
  if (!runs?.length) return undefined;
  const items = runs.map((r) =>
    JSON.stringify({
      at: formatMinuteUtc(r.at),
      kind: r.kind,
      status: r.status,
      summary: inline(r.summary, RECENT_RUN_SUMMARY_CHARS),
    }),
  );
  return {
    name: 'recent_runs',
    tier: 3,
    heading: '## Your Recent Runs (oldest first)',
    items,
    dropFrom: 'start',
    separator: '\n',
    fenceSource: 'run-history',
    maxTokens: RECENT_RUNS_MAX_TOKENS,
    shrinkOrder: SHRINK_ORDER.recent_runs,
  };
}

const DECISION_MEANING: Record<string, string> = {
  continue: 'kept working on the current item',
  preempt: 'paused the current item to resume later',
  cancel: 'permanently stopped the current item',
  merge: 'merged new input into the current item',
  defer: 'deferred the new item',
};

/** Focus (quantised elapsed), queue, last 5 decisions, merged content. */
function attentionSection(inputs: PromptInputs): SegmentDraft | undefined {
  const attention = inputs.attention;
  if (!attention) return undefined;
  const items: string[] = [];
  if (attention.focus) {
    const f = attention.focus;
    items.push(
      `Current focus: ${inline(f.type, 60)} — ${inline(f.summary, SYSTEM_MAILBOX_ITEM_PREVIEW_CHARS)} (${mailboxElapsedLabel(f.startedAt, inputs.now)})`,
    );
  } else {
    items.push('Current focus: none');
  }
  const queue = attention.queue;
  if (queue && queue.total > 0) {
    const lines = queue.items
      .slice(0, SYSTEM_MAILBOX_QUEUE_ITEMS_MAX)
      .map((item) => `- ${inline(item.type, 60)}: ${inline(item.summary, SYSTEM_MAILBOX_ITEM_PREVIEW_CHARS)}`);
    items.push(`Waiting in your mailbox: ${queue.total}${lines.length ? `\n${lines.join('\n')}` : ''}`);
  } else {
    items.push('Waiting in your mailbox: 0');
  }
  const decisions = attention.decisions?.slice(-SYSTEM_MAILBOX_DECISIONS_MAX);
  if (decisions?.length) {
    const lines = decisions.map(
      (d) =>
        `- ${d.decision} (${DECISION_MEANING[d.decision] ?? d.decision}): ${inline(d.reasoning, SYSTEM_MAILBOX_ITEM_PREVIEW_CHARS)}`,
    );
    items.push(`Recent attention decisions (oldest first):\n${lines.join('\n')}`);
  }
  if (attention.mergedContent?.trim()) {
    items.push(
      `Merged into your current work:\n${fence('merged-input', truncateChars(attention.mergedContent.trim(), SYSTEM_MAILBOX_MERGED_CHARS))}`,
    );
  }
  return {
    name: 'attention',
    tier: 3,
    heading: '## Your Attention State',
    items,
    dropFrom: 'end',
    separator: '\n',
    ...(offeredToolNames(inputs).has('check_mailbox') ? { footer: 'check_mailbox shows the full queue.' } : {}),
    shrinkOrder: SHRINK_ORDER.attention,
  };
}

function senderSection(inputs: PromptInputs): SegmentDraft | undefined {
  const sender = inputs.sender;
  if (!sender) return undefined;
  const role = sender.role ? `, ${inline(sender.role, 120)}` : '';
  return {
    name: 'sender',
    tier: 3,
    heading: '## Message Sender',
    items: [`This message is from ${inline(sender.name, 120)} (${sender.kind}${role}, id ${inline(sender.id, 80)}).`],
    dropFrom: 'end',
    separator: '\n',
  };
}

function availableToolsSection(inputs: PromptInputs): SegmentDraft | undefined {
  if (!inputs.tools?.length) return undefined;
  const names = [...new Set(inputs.tools.map((t) => t.name))].sort();
  return {
    name: 'available_tools',
    tier: 3,
    heading: '## Tools In This Call',
    items: [names.join(', ')],
    dropFrom: 'end',
    separator: '\n',
  };
}
