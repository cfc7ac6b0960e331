/**
 * The agent's world for the prompt (issue 12),
 * loaded from PostgreSQL:
 *
 * | prompt section | tier | from |
 * | --- | --- | --- |
 * | capabilities | 1 | `config.capabilities` |
 * | identity: organisation, manager, colleagues (≤ 10), human team members (≤ 8), installed skills | 2 | `config.org`, the org's agents (`config.position`), `user_profiles`, `skill_bindings` |
 * | organisation: CONTEXT.md, team announcements & norms | 2 | `organisations` |
 * | people you work with (`users/*.md`) | 2 | `user_profiles` |
 * | trust level | 2 | `config.trust` |
 * | environment (operating system, Node.js) | 2 | the worker process |
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
import os from 'node:os';
import { sql, type ExpressionBuilder, type Kysely, type Selection } from 'kysely';
import { jsonArrayFrom, jsonObjectFrom } from 'kysely/helpers/postgres';
import type { AgentRow, Database, TaskRow } from '../../schema/database';
import { MAILBOX_MERGE_SEPARATOR } from '../../workflows/rules/mailbox';
import {
  SYSTEM_COLLEAGUES_MAX,
  SYSTEM_MAILBOX_DECISIONS_MAX,
  SYSTEM_MAILBOX_QUEUE_ITEMS_MAX,
  type ActiveSkill,
  type AttentionDecisionKind,
  type PromptAttention,
  type PromptColleague,
  type PromptInputs,
  type PromptTask,
} from '../context';
import type { AgentConfig } from '../store/agents';
import { ANNOUNCEMENTS_SHOWN_MAX } from '../store/organisations';
import { pickVisible, visibleScopes, SKILL_CATALOGUE_FETCH_MAX, type Activations } from '../store/skills';
import { PRIORITY_RANK } from '../store/task-graph';
import { promptPriority } from '../../workflows/rules/priority';

/** Colleagues read for the identity section: 10 are listed, the rest counted. */
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
const DECISION_KINDS: Record<string, AttentionDecisionKind> = {
  preempt: 'preempt',
  merge: 'merge',
  wait: 'continue',
  continue: 'continue',
};

/**
 * The environment profile: what the agent's tools run on. Fixed per worker process, so
 * Tier 2 stays stable (a worker upgrade changes it once).
 */
const WORKER_ENVIRONMENT: Readonly<Record<string, string>> = Object.freeze({
  'operating system': `${os.type()} ${os.release().split('-')[0]} (${process.arch})`,
  'node.js': process.version,
});

/** Prompt inputs from the world, plus the parts that belong inside `agent` and the task board. */
export type PromptWorld = Partial<PromptInputs> & {
  installedSkills?: string[];
  manager?: { id: string; name: string; role?: string };
  capabilities?: string;
  teamTasks?: PromptTask[];
};

export interface WorldContext {
  scenario: PromptInputs['scenario'];
  task?: TaskRow | undefined;
  activations?: Activations;
}

export async function loadPromptWorld(
  db: Kysely<Database>,
  agent: AgentRow,
  config: AgentConfig,
  context: WorldContext,
): Promise<PromptWorld> {
  // One round trip: every part is a JSON subquery (an agent without an organisation skips those parts).
  const row = await db.selectNoFrom((eb) => worldSelections(eb, agent, config, context)).executeTakeFirstOrThrow();
  return worldFromRow(row, agent, config, context);
}

/** The world's row as `worldSelections` reads it. */
export type WorldRow = Selection<Database, never, ReturnType<typeof worldSelections>[number]>;

/**
 * The world's reads as JSON subqueries, to select on their own (`loadPromptWorld`) or beside the
 * prompt's other reads in one statement (`fetchPromptRows`).
 */
export function worldSelections(
  eb: ExpressionBuilder<Database, never>,
  agent: AgentRow,
  config: AgentConfig,
  context: WorldContext,
) {
  const org = config.org;
  const scopes = visibleScopes(agent.id, org);
  const orgName = org ?? '';
  const colleaguesOf = (eb: ExpressionBuilder<Database, never>) =>
    eb
      .selectFrom('agents')
      .select('agents.id')
      .where(sql<string>`agents.config->>'org'`, '=', orgName)
      .where('agents.id', '!=', agent.id);
  return [
    jsonObjectFrom(
      eb.selectFrom('organisations').select(['context_md', 'announcements_md']).where('name', '=', orgName),
    ).as('organisation'),
    jsonArrayFrom(
      eb
        .selectFrom('user_profiles')
        .select(['handle', 'name', 'profile_md'])
        .where('org', '=', orgName)
        .orderBy('handle')
        .limit(HUMANS_FETCH_MAX),
    ).as('people'),
    jsonArrayFrom(
      eb
        .selectFrom('agents')
        .select(['id', 'name', 'description', sql<string | null>`config->>'position'`.as('position')])
        .where(sql<string>`config->>'org'`, '=', orgName)
        .where('id', '!=', agent.id)
        .orderBy('id')
        .limit(COLLEAGUES_FETCH_MAX),
    ).as('colleagues'),
    jsonArrayFrom(
      eb
        .selectFrom('skills')
        .leftJoin('skill_bindings', (join) =>
          join.onRef('skill_bindings.skill_name', '=', 'skills.name').on('skill_bindings.agent_id', '=', agent.id),
        )
        .select([
          'skills.scope',
          'skills.name',
          'skills.category',
          'skills.description',
          'skills.body',
          'skill_bindings.agent_id as bound_to',
        ])
        .where('skills.scope', 'in', scopes)
        .orderBy('skills.name')
        .limit(SKILL_CATALOGUE_FETCH_MAX),
    ).as('skills'),
    jsonArrayFrom(
      eb
        .selectFrom('announcements')
        .select(['text'])
        .where((w) => w.or([w('org', 'is', null), ...(org ? [w('org', '=', org)] : [])]))
        .where((w) => w.or([w('expires_at', 'is', null), w('expires_at', '>', sql<Date>`now()`)]))
        .orderBy('id', 'desc')
        .limit(ANNOUNCEMENTS_SHOWN_MAX),
    ).as('announcements'),
    jsonArrayFrom(
      eb
        .selectFrom('mailbox_items')
        .select(['kind', 'text', 'priority', 'status', 'updated_at', 'merged_count'])
        .where('agent_id', '=', agent.id)
        .where('status', 'in', ['processing', 'queued', 'deferred'])
        .orderBy('priority')
        .orderBy('created_at')
        .limit(MAILBOX_OPEN_FETCH_MAX),
    ).as('mailbox'),
    jsonArrayFrom(
      eb
        .selectFrom('mailbox_items')
        .select(['decision', 'reason', 'kind'])
        .where('agent_id', '=', agent.id)
        .where('decision', 'in', Object.keys(DECISION_KINDS))
        .orderBy('updated_at', 'desc')
        .orderBy('id')
        .limit(SYSTEM_MAILBOX_DECISIONS_MAX),
    ).as('decisions'),
    jsonArrayFrom(
      eb
        .selectFrom('skill_bindings')
        .select(['agent_id', 'skill_name'])
        .where('agent_id', 'in', colleaguesOf(eb).orderBy('agents.id').limit(SYSTEM_COLLEAGUES_MAX))
        .orderBy('skill_name'),
    ).as('colleagueSkills'),
    jsonArrayFrom(
      eb
        .selectFrom('tasks')
        .select(['agent_id', 'title'])
        .where('agent_id', 'in', colleaguesOf(eb).orderBy('agents.id').limit(SYSTEM_COLLEAGUES_MAX))
        .where('state', '=', 'in_progress')
        .orderBy('updated_at', 'desc'),
    ).as('colleagueWork'),
    // The task board's team part (the team's top 10 open tasks by priority).
    jsonArrayFrom(
      eb
        .selectFrom('tasks')
        .select(['id', 'title', 'priority', 'state', 'agent_id'])
        .where('agent_id', 'in', colleaguesOf(eb))
        .where('state', 'in', ['pending', 'in_progress', 'blocked', 'review'])
        .orderBy(PRIORITY_RANK)
        .orderBy('updated_at', 'desc')
        .limit(TEAM_TASKS_FETCH_MAX),
    ).as('teamTasks'),
    jsonObjectFrom(
      eb
        .selectFrom('tasks')
        .select(['title', 'description'])
        .where('id', '=', context.task?.parent_task_id ?? ''),
    ).as('parent'),
  ] as const;
}

/** The prompt's world from its row: colleagues, skills (activated ones in full), mailbox attention, team. */
export function worldFromRow(row: WorldRow, agent: AgentRow, config: AgentConfig, context: WorldContext): PromptWorld {
  const org = config.org;
  const activations = context.activations ?? { skills: new Set<string>(), tools: new Set<string>() };
  const scopes = visibleScopes(agent.id, org);
  const { organisation, people, colleagues, announcements, colleagueSkills, colleagueWork, teamTasks, parent } = row;
  const skills = pickVisible(row.skills, scopes).map((r) => ({ ...r, bound: r.bound_to !== null }));
  const mailbox = attentionFrom(
    row.mailbox.map((m) => ({ ...m, updated_at: new Date(m.updated_at) })),
    row.decisions,
  );
  const shownColleagues = colleagues.slice(0, SYSTEM_COLLEAGUES_MAX);

  const agentColleagues: PromptColleague[] = colleagues.map((c) => {
    const own = colleagueSkills
      .filter((s) => s.agent_id === c.id)
      .map((s) => s.skill_name)
      .slice(0, COLLEAGUE_SKILLS_MAX);
    return {
      id: c.id,
      name: c.name,
      kind: 'agent',
      ...(c.description ? { role: c.description } : {}),
      ...(own.length ? { skills: own } : {}),
    };
  });
  const humans: PromptColleague[] = people.map((p) => ({ id: p.handle, name: p.name, kind: 'human' }));
  const manager = config.position === 'manager' ? undefined : colleagues.find((c) => c.position === 'manager');

  // Bound skills are always shown (a summary until activated); activated ones in full. The catalogue
  // lists what is neither, for discover_tools.
  const active: ActiveSkill[] = skills
    .filter((s) => s.bound || activations.skills.has(s.name))
    .map((s) => ({ name: s.name, description: s.description, body: s.body, expanded: activations.skills.has(s.name) }));
  const catalogue = skills
    .filter((s) => !s.bound && !activations.skills.has(s.name))
    .map((s) => ({ name: s.name, description: s.description, ...(s.category ? { category: s.category } : {}) }));

  const world: PromptWorld = { environment: WORKER_ENVIRONMENT };
  if (config.capabilities?.trim()) world.capabilities = config.capabilities;
  if (org) {
    world.organisation = {
      name: org,
      ...(organisation?.context_md ? { context: organisation.context_md } : {}),
      ...(organisation?.announcements_md ? { announcements: organisation.announcements_md } : {}),
    };
  }
  if (agentColleagues.length || humans.length) world.colleagues = [...agentColleagues, ...humans];
  if (people.length) world.userProfiles = people.map((p) => ({ name: p.name, profile: p.profile_md }));
  if (manager)
    world.manager = {
      id: manager.id,
      name: manager.name,
      ...(colleagues.find((c) => c.id === manager.id)?.description ? { role: manager.description } : {}),
    };
  if (config.trust)
    world.trust = {
      level: config.trust.level,
      ...(config.trust.description ? { description: config.trust.description } : {}),
    };
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
    world.teamTasks = teamTasks.map((t) => ({
      id: t.id,
      title: t.title,
      priority: promptPriority(t.priority),
      status: t.state,
      assignee: names.get(t.agent_id) ?? t.agent_id,
    }));
  }
  if (context.task) world.skillQuery = `${context.task.title} ${context.task.description}`;
  return world;
}

/**
 * The attention state from the agent's mailbox: the item being processed (elapsed time quantised by the
 * renderer), what waits (count and the top 5 by priority), the last 5 triage decisions with their
 * reasons, and what was merged into the current item. Undefined for an agent that never had mail.
 */
function attentionFrom(
  open: Array<{ kind: string; text: string; priority: number; status: string; updated_at: Date; merged_count: number }>,
  decisions: Array<{ decision: string; reason: string; kind: string }>,
): PromptAttention | undefined {
  const focus = open
    .filter((i) => i.status === 'processing')
    .sort((a, b) => b.updated_at.getTime() - a.updated_at.getTime())[0];
  const queued = open.filter((i) => i.status !== 'processing');
  if (!focus && queued.length === 0 && decisions.length === 0) return undefined;
  const attention: PromptAttention = {
    queue: {
      total: queued.length,
      items: queued
        .slice(0, SYSTEM_MAILBOX_QUEUE_ITEMS_MAX)
        .map((w) => ({ type: w.kind, summary: w.text, priority: w.priority })),
    },
  };
  if (focus) {
    const [first, ...merged] = focus.text.split(MAILBOX_MERGE_SEPARATOR);
    attention.focus = { type: focus.kind, summary: first ?? focus.text, startedAt: focus.updated_at.getTime() };
    if (focus.merged_count > 0 && merged.length) attention.mergedContent = merged.join('\n');
  }
  if (decisions.length) {
    attention.decisions = [...decisions]
      .reverse()
      .map((d) => ({ decision: DECISION_KINDS[d.decision]!, reasoning: `${d.kind}: ${d.reason}` }));
  }
  return attention;
}
