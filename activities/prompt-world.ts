/**
 * The agent's world for the prompt (issue 12; seeds D1 B3, B4, B11, B13, B15, B20 and D2 G5, G10, G12),
 * loaded from PostgreSQL:
 *
 * | prompt section | tier | from |
 * | --- | --- | --- |
 * | capabilities | 1 | `config.capabilities` |
 * | identity: organisation, manager, colleagues (≤ 10), human team members (≤ 8), installed skills | 2 | `config.org`, the org's agents (`config.position`), `user_profiles`, `skill_bindings` |
 * | organisation: CONTEXT.md, team announcements & norms | 2 | `organisations` |
 * | people you work with (`users/*.md`) | 2 | `user_profiles` |
 * | trust level | 2 | `config.trust` |
 * | active skills (bound: 200-char summary; activated: full body; ≤ 4,000 tokens) | 2 | `skill_bindings`, `skill_activations` |
 * | scope (the parent task of a subtask) | 2 | `tasks.parent_task_id` |
 * | system announcements (live, newest 5) | 3 | `announcements` |
 * | available skills (query-filtered, ≤ 30) | 3 | `skills` (shared and the agent's own, not yet active) |
 * | team status (colleagues' current task), the board's team tasks (top 10) | 3 | `tasks` |
 * | attention state (focus, queue, last decisions, merged input) | 3 | `mailbox_items` |
 *
 * Tier 2 inputs are ordered by key (colleagues by id, people by handle, skills by name) and carry no
 * clock or counter, so Tiers 1–2 stay byte-identical until the data itself changes.
 */
import { sql, type Kysely } from 'kysely';
import type { AgentRow, Database, TaskRow } from '../schema/database';
import { MAILBOX_MERGE_SEPARATOR } from '../workflows/rules/mailbox';
import { SYSTEM_COLLEAGUES_MAX, SYSTEM_MAILBOX_DECISIONS_MAX, SYSTEM_MAILBOX_QUEUE_ITEMS_MAX, type ActiveSkill, type AttentionDecisionKind, type PromptAttention, type PromptColleague, type PromptInputs, type PromptTask } from './context';
import type { AgentConfig } from './store/agents';
import { ANNOUNCEMENTS_SHOWN_MAX } from './store/organisations';
import { visibleSkills, type Activations } from './store/skills';
import { PRIORITY_RANK } from './store/task-graph';

/** Colleagues read for the identity section: 10 are listed, the rest counted (seed D1 B13). */
const COLLEAGUES_FETCH_MAX = 200;
/** Human profiles read (the identity section lists 8; the profiles section shows them all, each ≤ 1,500 chars). */
const HUMANS_FETCH_MAX = 50;
/** Team tasks read for the board (it lists 10 and counts the rest, up to this many). */
const TEAM_TASKS_FETCH_MAX = 100;
/** Skills listed per colleague in the identity section. */
const COLLEAGUE_SKILLS_MAX = 8;

/** Open mailbox items read for the attention section: the queue's count is exact up to here (a mailbox holds far fewer). */
const MAILBOX_OPEN_FETCH_MAX = 500;

/** Mailbox triage decisions as the attention section names them; `pick` (agent idle) is not a decision. */
const DECISION_KINDS: Record<string, AttentionDecisionKind> = { preempt: 'preempt', merge: 'merge', wait: 'continue', continue: 'continue' };

/** Prompt inputs from the world, plus the parts that belong inside `agent` and the task board. */
export type PromptWorld = Partial<PromptInputs> & { installedSkills?: string[]; manager?: { id: string; name: string; role?: string }; capabilities?: string; teamTasks?: PromptTask[] };

export interface WorldContext {
  scenario: PromptInputs['scenario'];
  task?: TaskRow | undefined;
  activations?: Activations;
}

export async function loadPromptWorld(db: Kysely<Database>, agent: AgentRow, config: AgentConfig, context: WorldContext): Promise<PromptWorld> {
  const org = config.org;
  const activations = context.activations ?? { skills: new Set<string>(), tools: new Set<string>() };
  const [organisation, people, colleagues, skills, announcements, mailbox, parent] = await Promise.all([
    org ? db.selectFrom('organisations').selectAll().where('name', '=', org).executeTakeFirst() : undefined,
    org ? db.selectFrom('user_profiles').select(['handle', 'name', 'profile_md']).where('org', '=', org).orderBy('handle').limit(HUMANS_FETCH_MAX).execute() : [],
    org
      ? db
          .selectFrom('agents')
          .select(['id', 'name', 'description', sql<string | null>`config->>'position'`.as('position')])
          .where(sql<string>`config->>'org'`, '=', org)
          .where('id', '!=', agent.id)
          .orderBy('id')
          .limit(COLLEAGUES_FETCH_MAX)
          .execute()
      : [],
    visibleSkills(db, agent.id, org),
    db
      .selectFrom('announcements')
      .select(['text'])
      .where((eb) => eb.or([eb('org', 'is', null), ...(org ? [eb('org', '=', org)] : [])]))
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', new Date())]))
      .orderBy('id', 'desc')
      .limit(ANNOUNCEMENTS_SHOWN_MAX)
      .execute(),
    loadAttention(db, agent.id),
    context.task?.parent_task_id ? db.selectFrom('tasks').select(['title', 'description']).where('id', '=', context.task.parent_task_id).executeTakeFirst() : undefined,
  ]);

  const shownColleagues = colleagues.slice(0, SYSTEM_COLLEAGUES_MAX);
  const [colleagueSkills, colleagueWork, teamTasks] = await Promise.all([
    shownColleagues.length
      ? db.selectFrom('skill_bindings').select(['agent_id', 'skill_name']).where('agent_id', 'in', shownColleagues.map((c) => c.id)).orderBy('skill_name').execute()
      : [],
    shownColleagues.length
      ? db
          .selectFrom('tasks')
          .select(['agent_id', 'title'])
          .where('agent_id', 'in', shownColleagues.map((c) => c.id))
          .where('state', '=', 'in_progress')
          .orderBy('updated_at', 'desc')
          .execute()
      : [],
    // The task board's team part (seed D1 B14: the team's top 10 open tasks by priority).
    colleagues.length
      ? db
          .selectFrom('tasks')
          .select(['id', 'title', 'priority', 'state', 'agent_id'])
          .where('agent_id', 'in', colleagues.map((c) => c.id))
          .where('state', 'in', ['pending', 'in_progress', 'blocked', 'review'])
          .orderBy(PRIORITY_RANK)
          .orderBy('updated_at', 'desc')
          .limit(TEAM_TASKS_FETCH_MAX)
          .execute()
      : [],
  ]);

  const agentColleagues: PromptColleague[] = colleagues.map((c) => {
    const own = colleagueSkills.filter((s) => s.agent_id === c.id).map((s) => s.skill_name).slice(0, COLLEAGUE_SKILLS_MAX);
    return { id: c.id, name: c.name, kind: 'agent', ...(c.description ? { role: c.description } : {}), ...(own.length ? { skills: own } : {}) };
  });
  const humans: PromptColleague[] = people.map((p) => ({ id: p.handle, name: p.name, kind: 'human' }));
  const manager = config.position === 'manager' ? undefined : colleagues.find((c) => c.position === 'manager');

  // Bound skills are always shown (a summary until activated); activated ones in full. The catalogue
  // lists what is neither, for discover_tools.
  const active: ActiveSkill[] = skills
    .filter((s) => s.bound || activations.skills.has(s.name))
    .map((s) => ({ name: s.name, description: s.description, body: s.body, expanded: activations.skills.has(s.name) }));
  const catalogue = skills.filter((s) => !s.bound && !activations.skills.has(s.name)).map((s) => ({ name: s.name, description: s.description, ...(s.category ? { category: s.category } : {}) }));

  const world: PromptWorld = {};
  if (config.capabilities?.trim()) world.capabilities = config.capabilities;
  if (org) {
    world.organisation = { name: org, ...(organisation?.context_md ? { context: organisation.context_md } : {}), ...(organisation?.announcements_md ? { announcements: organisation.announcements_md } : {}) };
  }
  if (agentColleagues.length || humans.length) world.colleagues = [...agentColleagues, ...humans];
  if (people.length) world.userProfiles = people.map((p) => ({ name: p.name, profile: p.profile_md }));
  if (manager) world.manager = { id: manager.id, name: manager.name, ...(colleagues.find((c) => c.id === manager.id)?.description ? { role: manager.description } : {}) };
  if (config.trust) world.trust = { level: config.trust.level, ...(config.trust.description ? { description: config.trust.description } : {}) };
  const installed = skills.filter((s) => s.bound).map((s) => s.name);
  if (installed.length) world.installedSkills = installed;
  if (active.length) world.activeSkills = active;
  if (catalogue.length) world.skills = catalogue;
  if (parent) world.scope = { kind: 'work', name: parent.title, description: parent.description || parent.title };
  if (announcements.length) world.announcements = announcements.reverse().map((a) => a.text);
  if (shownColleagues.length) {
    world.teamStatus = shownColleagues.map((c) => {
      const work = colleagueWork.find((w) => w.agent_id === c.id);
      return { name: c.name, status: work ? `working on "${work.title}"` : 'no task in progress' };
    });
  }
  if (mailbox) world.attention = mailbox;
  if (teamTasks.length) {
    const names = new Map(colleagues.map((c) => [c.id, c.name]));
    world.teamTasks = teamTasks.map((t) => ({ id: t.id, title: t.title, priority: toPriority(t.priority), status: t.state, assignee: names.get(t.agent_id) ?? t.agent_id }));
  }
  if (context.task) world.skillQuery = `${context.task.title} ${context.task.description}`;
  return world;
}

/**
 * Seed D1 B15 from the agent's mailbox: the item being processed (elapsed time quantised by the
 * renderer), what waits (count and the top 5 by priority), the last 5 triage decisions with their
 * reasons, and what was merged into the current item. Undefined for an agent that never had mail.
 */
async function loadAttention(db: Kysely<Database>, agentId: string): Promise<PromptAttention | undefined> {
  const [open, decisions] = await Promise.all([
    db
      .selectFrom('mailbox_items')
      .select(['kind', 'text', 'priority', 'status', 'updated_at', 'merged_count'])
      .where('agent_id', '=', agentId)
      .where('status', 'in', ['processing', 'queued', 'deferred'])
      .orderBy('priority')
      .orderBy('created_at')
      .limit(MAILBOX_OPEN_FETCH_MAX)
      .execute(),
    db
      .selectFrom('mailbox_items')
      .select(['decision', 'reason', 'kind'])
      .where('agent_id', '=', agentId)
      .where('decision', 'in', Object.keys(DECISION_KINDS))
      .orderBy('updated_at', 'desc')
      .orderBy('id')
      .limit(SYSTEM_MAILBOX_DECISIONS_MAX)
      .execute(),
  ]);
  const focus = open.filter((i) => i.status === 'processing').sort((a, b) => b.updated_at.getTime() - a.updated_at.getTime())[0];
  const queued = open.filter((i) => i.status !== 'processing');
  const waiting = queued.slice(0, SYSTEM_MAILBOX_QUEUE_ITEMS_MAX);
  const count = { n: queued.length };
  const total = Number(count.n);
  if (!focus && total === 0 && decisions.length === 0) return undefined;
  const attention: PromptAttention = {
    queue: { total, items: waiting.map((w) => ({ type: w.kind, summary: w.text, priority: w.priority })) },
  };
  if (focus) {
    const [first, ...merged] = focus.text.split(MAILBOX_MERGE_SEPARATOR);
    attention.focus = { type: focus.kind, summary: first ?? focus.text, startedAt: focus.updated_at.getTime() };
    if (focus.merged_count > 0 && merged.length) attention.mergedContent = merged.join('\n');
  }
  if (decisions.length) {
    attention.decisions = decisions.reverse().map((d) => ({ decision: DECISION_KINDS[d.decision]!, reasoning: `${d.kind}: ${d.reason}` }));
  }
  return attention;
}

function toPriority(p: string): PromptTask['priority'] {
  return (['critical', 'urgent', 'high', 'medium', 'low'] as const).find((x) => x === p) ?? 'medium';
}
