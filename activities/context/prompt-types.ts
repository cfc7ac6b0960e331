/**
 * Inputs and outputs of `buildSystemPrompt`. A plain, serialisable object: the LLM-step activity loads
 * these from PostgreSQL (the workflow passes only ids) and calls the pure builder.
 *
 * Stability contract: fields marked (T1) or (T2) feed the cached tiers; when they are equal, Tiers 1 and
 * 2 are byte-identical whatever the (T3) fields, `now` or the calibration state. Record-typed fields are
 * rendered sorted by key; arrays in the order given, so pass them in a stable order.
 */
import type { SystemSegment, ToolDefinition } from '../llm/types';
import type { Instant } from './quantize';
import type { PromptPriority } from '../../workflows/rules/priority';

export type PromptScenario =
  | 'task'
  | 'chat'
  | 'heartbeat'
  | 'reflection'
  | 'consolidation'
  | 'a2a'
  | 'comment_response'
  | 'group_chat'
  | 'subagent';

export interface AgentFiles {
  /** SOUL.md: identity and persona (required). */
  soul: string;
  /** AGENTS.md: role and behaviour, the ROLE.md equivalent (required). */
  agents: string;
  /** HEARTBEAT.md: the operating loop of heartbeat runs. */
  heartbeat?: string;
  /** TOOLS.md: how the agent uses its tools (≤ 1,500 tokens). */
  tools?: string;
}

export interface PromptAgent {
  id: string;
  name: string;
  role?: string;
  position?: 'manager' | 'worker';
  files: AgentFiles;
  /** (T1) free-text capabilities. */
  capabilities?: string;
  /** (T1) permission flags, rendered as granted capabilities next to TOOLS.md. */
  permissions?: Record<string, boolean>;
  /** (T2) names of installed skills (identity section). */
  installedSkills?: string[];
  /** (T2) the agent's manager, for workers. */
  manager?: { id: string; name: string; role?: string };
}

/** A colleague in the identity section: no live status here (that is Tier 3 team status). */
export interface PromptColleague {
  id: string;
  name: string;
  role?: string;
  kind: 'agent' | 'human';
  skills?: string[];
}

export interface PromptOrganisation {
  name: string;
  /** CONTEXT.md. */
  context?: string;
  /** Team announcements and norms (semi-stable). */
  announcements?: string;
}

export interface PromptWorkspace {
  /** The agent's own directory. */
  root: string;
  /** Other labelled paths (shared, outputs, repositories…). */
  paths?: Record<string, string>;
}

export interface KnowledgeSection {
  heading: string;
  body: string;
}

export interface NotebookEntry {
  key: string;
  content: string;
  /** Agent = update_notebook, system = runtime (triage, retrieval), cpp = cognitive preparation. */
  tag: 'agent' | 'system' | 'cpp';
  updatedAt: Instant;
}

export interface SkillSummary {
  name: string;
  category?: string;
  description: string;
}

/** A skill whose instructions are in the prompt (bound to the agent or activated with discover_tools). */
export interface ActiveSkill {
  name: string;
  description?: string;
  body: string;
  /** Activated this session: full body. Otherwise progressive disclosure (200 chars of body). */
  expanded?: boolean;
}

export interface PromptTask {
  id: string;
  title: string;
  priority: PromptPriority;
  status: string;
  description?: string;
  assignee?: string;
}

export interface PromptTaskBoard {
  mine: PromptTask[];
  team?: PromptTask[];
  /**
   * When the loader fetched only the top of the board: how many of my tasks are open in all (for the
   * overflow hint) and how many are closed (shown as a count). Absent: counted from `mine`.
   */
  myOpenTotal?: number;
  myClosedTotal?: number;
}

export type AttentionDecisionKind = 'continue' | 'preempt' | 'cancel' | 'merge' | 'defer';

export interface PromptAttention {
  focus?: { type: string; summary: string; startedAt: Instant };
  queue?: { total: number; items: Array<{ type: string; summary: string; priority?: number }> };
  /** Oldest first; the last 5 are shown. */
  decisions?: Array<{ decision: AttentionDecisionKind; reasoning: string }>;
  mergedContent?: string;
}

export interface PromptSender {
  id: string;
  name: string;
  kind: 'human' | 'agent';
  role?: string;
}

export interface ActivityEvent {
  at: Instant;
  type: string;
  detail: string;
  actor?: string;
}

export interface RunSummary {
  at: Instant;
  kind: string;
  status: string;
  summary: string;
}

export interface PromptScope {
  kind: 'mission' | 'idea' | 'work' | 'project' | 'team';
  name?: string;
  /** Mission / idea description or work initial prompt (≤ 800 tokens). */
  description: string;
}

export interface PromptInputs {
  scenario: PromptScenario;
  agent: PromptAgent;
  /** Chooses the tokenizer for the segment budgets. */
  model?: string;
  /** (T3) the current instant; the only clock the builder sees. */
  now: Instant;
  /** IANA zone for the timestamp, default UTC. */
  timezone?: string;

  // Tier 2
  colleagues?: PromptColleague[];
  organisation?: PromptOrganisation;
  workspace?: PromptWorkspace;
  userProfiles?: Array<{ name: string; profile: string }>;
  trust?: { level: string; description?: string };
  environment?: Record<string, string>;
  knowledge?: KnowledgeSection[];
  activeSkills?: ActiveSkill[];
  scope?: PromptScope;

  // Tier 3
  announcements?: string[];
  notebook?: NotebookEntry[];
  /** All skills the agent could discover; filtered by `skillQuery` relevance and capped at 30. */
  skills?: SkillSummary[];
  skillQuery?: string;
  tasks?: PromptTaskBoard;
  teamStatus?: Array<{ name: string; status: string }>;
  /** Oldest first; the last 20 are used. */
  recentActivity?: ActivityEvent[];
  /** Oldest first; the last 5 are used. */
  recentRuns?: RunSummary[];
  attention?: PromptAttention;
  sender?: PromptSender;
  /** Tools offered in this call; listed by name so the model knows what is not available. */
  tools?: ToolDefinition[];
}

export type PromptSegmentName =
  | 'identity'
  | 'role'
  | 'capabilities'
  | 'tools'
  | 'policies'
  | 'deliverables'
  | 'task_workflow'
  | 'tool_usage'
  | 'communication'
  | 'identity_section'
  | 'organisation'
  | 'workspace'
  | 'user_profiles'
  | 'trust'
  | 'environment'
  | 'knowledge'
  | 'active_skills'
  | 'scope_context'
  | 'scenario'
  | 'announcements'
  | 'notebook'
  | 'skills_catalogue'
  | 'task_board'
  | 'team_status'
  | 'recent_activity'
  | 'recent_runs'
  | 'attention'
  | 'sender'
  | 'available_tools'
  | 'timestamp'
  | 'total';

/** One truncation made to fit a budget (logged at WARN, step `prompt-assembly`). */
export interface PromptWarning {
  segment: PromptSegmentName;
  originalTokens: number;
  keptTokens: number;
}

export interface SystemPrompt {
  /** [Tier 1 (breakpoint), Tier 2 (breakpoint), Tier 3]. */
  segments: SystemSegment[];
  warnings: PromptWarning[];
  /** Calibrated estimate of the whole system message, for prepareMessages' `systemTokens`. */
  tokenEstimate: number;
}
