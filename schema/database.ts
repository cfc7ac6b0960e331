/**
 * Kysely `Database` types: the shape of every table the migrations in `./migrations` create.
 * Keep in step with the migrations (which never import this file: they are frozen in time).
 */
import type { ColumnType, Generated, Insertable, JSONColumnType, Selectable, Updateable } from 'kysely';

type CreatedAt = ColumnType<Date, Date | string | undefined, never>;
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
/** NUMERIC comes back from `pg` as a string to keep its precision. */
type Numeric = ColumnType<string, number | string | undefined, number | string>;

export interface AgentsTable {
  id: string;
  name: string;
  description: string;
  soul_md: string;
  agents_md: string;
  heartbeat_md: string;
  tools_md: string;
  /** sha256 over the four identity files; the etag for optimistic concurrency. */
  content_hash: string;
  /** AgentConfig: model, provider, tier, budget, permissions, timezone. */
  config: JSONColumnType<Record<string, unknown>>;
  workspace_dir: string;
  /** The organisation: `config.org`, else 'default' (a generated column: never written). */
  org: ColumnType<string, never, never>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface TasksTable {
  id: string;
  agent_id: string;
  title: string;
  description: string;
  state: string;
  round: Generated<number>;
  priority: Generated<string>;
  created_by: string | null;
  result_summary: string | null;
  last_error: string | null;
  created_at: CreatedAt;
  updated_at: Timestamp;
  completed_at: NullableTimestamp;
  /** The task this one is a subtask of (cancelling the parent cancels it). */
  parent_task_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** Created by an agent whose config requires a human's approval before the task may start. */
  needs_approval: Generated<boolean>;
  /** A fork's source task (issue 25); null for every other task. */
  fork_of: ColumnType<string | null, string | null | undefined, string | null>;
  /** The assignee's organisation, stamped by a trigger on insert and moved with the agent: never written. */
  org: ColumnType<string, never, never>;
  /** The task whose cost budget this one draws on (the agent's task that created it); its spend counts there. */
  budget_parent_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** The budget granted at creation (its budget ancestors' remaining then), USD; null: none. */
  cost_budget_usd: ColumnType<number | null, number | null | undefined, number | null>;
}

/** `task_id` stays blocked until `depends_on` is completed. */
export interface TaskDependenciesTable {
  task_id: string;
  depends_on: string;
  created_at: CreatedAt;
}

/** The humans' inbox: notify_user and request_user_approval, with a read state. */
export interface NotificationsTable {
  id: string;
  agent_id: string;
  task_id: string | null;
  kind: 'notification' | 'approval_request';
  title: string;
  body: string;
  priority: ColumnType<
    'low' | 'normal' | 'high' | 'urgent',
    'low' | 'normal' | 'high' | 'urgent' | undefined,
    'low' | 'normal' | 'high' | 'urgent'
  >;
  options: ColumnType<string[] | null, string | null | undefined, string | null>;
  read_at: NullableTimestamp;
  read_by: string | null;
  created_at: CreatedAt;
}

/** A goal the heartbeat advances one iteration per check-in until done or out of iterations. */
export interface GoalsTable {
  id: string;
  agent_id: string;
  title: string;
  criteria: string;
  status: 'active' | 'paused' | 'completed' | 'max_iterations';
  current_iteration: Generated<number>;
  max_iterations: number;
  last_checked_run: string | null;
  last_checked_at: NullableTimestamp;
  created_at: CreatedAt;
  updated_at: Timestamp;
  completed_at: NullableTimestamp;
}

export interface TaskEventsTable {
  id: Generated<string>;
  task_id: string;
  /** noun-verb: `task-created`, `state-changed`, `llm-call-finished`, `tool-call-finished`, `approval-requested` … */
  type: string;
  data: JSONColumnType<Record<string, unknown>>;
  /** Unique per task when set: makes an activity's event write idempotent across retries. */
  idem_key: string | null;
  /** Dense per task, in commit order (set by a trigger): the resume cursor of event streams. */
  seq: ColumnType<string, never, never>;
  /** The task's agent (set by the same trigger): the agent's recent activity is read by it. */
  agent_id: ColumnType<string | null, never, never>;
  created_at: CreatedAt;
}

export interface SessionsTable {
  id: string;
  agent_id: string;
  task_id: string | null;
  kind: string;
  created_at: CreatedAt;
}

export interface MessagesTable {
  id: Generated<string>;
  session_id: string;
  /** Unique per session: the workflow-chosen key that makes a retried write a no-op. */
  idem_key: string;
  role: 'user' | 'assistant';
  kind: string;
  content: JSONColumnType<unknown[]>;
  created_at: CreatedAt;
}

export interface ToolCallsTable {
  session_id: string;
  tool_call_id: string;
  task_id: string | null;
  agent_id: string;
  tool: string;
  args: ColumnType<unknown, string, string>;
  /** started → completed | failed; `started` found by a retry means the outcome is unknown. */
  status: 'started' | 'completed' | 'failed';
  side_effecting: boolean;
  result: string | null;
  is_error: boolean;
  executions: Generated<number>;
  /** How many secret values were cut out of `result` before it was stored (0: none). */
  redactions: Generated<number>;
  started_at: CreatedAt;
  completed_at: NullableTimestamp;
}

/** Remote URLs a workspace's repositories may fetch from and push to (issue 8). */
export interface WorkspaceRemotesTable {
  workspace_dir: string;
  url: string;
  /** `first-sight`: configured when governance first looked; `approved`: a human approved it. */
  source: 'first-sight' | 'approved';
  agent_id: string | null;
  created_at: CreatedAt;
}

export interface ToolOutputsTable {
  id: string;
  session_id: string;
  tool_call_id: string;
  content: string;
  chars: number;
  created_at: CreatedAt;
}

/** The MCP tools one LLM step offered, recorded once (definitions only, never configuration or secrets). */
export interface McpToolSnapshotsTable {
  session_id: string;
  step_key: string;
  tools: ColumnType<unknown, string, string>;
  refused: ColumnType<unknown, string | undefined, string>;
  created_at: CreatedAt;
}

/** Every image a tool call returned; the session's messages keep only the newest (see `tool-result-images.ts`). */
export interface ToolResultImagesTable {
  session_id: string;
  tool_call_id: string;
  position: number;
  media_type: string;
  data: string;
  bytes: number;
  created_at: CreatedAt;
}

export interface ApprovalsTable {
  id: string;
  task_id: string | null;
  agent_id: string;
  workflow_id: string;
  tool: string;
  args: ColumnType<unknown, string, string>;
  summary: string;
  /**
   * `withdrawn`: the attempt that asked was paused, cancelled or failed before anyone decided.
   * `expired`: a policy's expiry passed with nobody deciding (without a policy that is `timed_out`).
   */
  status: 'pending' | 'approved' | 'rejected' | 'timed_out' | 'expired' | 'withdrawn';
  requested_at: CreatedAt;
  decided_at: NullableTimestamp;
  decided_by: string | null;
  comment: string | null;
  /** The policy the request was opened with (migration 023); null without one. */
  policy: ColumnType<unknown, string | null | undefined, string | null>;
  /** The wait's state as the workflow last recorded it (`ApprovalWaitState`); null without a policy. */
  wait_state: ColumnType<unknown, string | null | undefined, string | null>;
}

/** The audit trail of approval requests (migration 023), written by activities, one row per event. */
export interface ApprovalEventsTable {
  id: Generated<string>;
  request_id: string;
  task_id: string | null;
  kind:
    'asked' | 'reminded' | 'escalated' | 'approved' | 'rejected' | 'delegated' | 'extended' | 'expired' | 'timed_out';
  actor: string | null;
  targets: ColumnType<string[], string | undefined, string>;
  comment: string | null;
  event_key: string;
  created_at: CreatedAt;
}

export interface LlmCallsTable {
  id: Generated<string>;
  agent_id: string;
  task_id: string | null;
  session_id: string | null;
  /** Unique per session when set: the LLM step's idempotency key. */
  idem_key: string | null;
  provider: string;
  model: string;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  cost_usd: Numeric;
  duration_ms: number;
  stop_reason: string | null;
  error: string | null;
  created_at: CreatedAt;
}

// ---- memory and its scheduled workflows; identity self-edits ------

export interface MemoryNotebookTable {
  agent_id: string;
  key: string;
  content: string;
  /** agent = update_notebook (capped, evicted); system = runtime; cpp = cognitive preparation. */
  tag: 'agent' | 'system' | 'cpp';
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface MemoryObservationsTable {
  /** `obs_…`: derived from the writing call, so a retried write is a no-op. */
  id: string;
  /** Insertion order (oldest trimmed first). */
  seq: Generated<string>;
  agent_id: string;
  type: string;
  tags: ColumnType<string[], string[] | undefined, string[]>;
  content: string;
  /** Where it came from: a session id, or `dream:<consolidation>`. */
  source: string | null;
  created_at: CreatedAt;
  /** Generated: to_tsvector('english', content). */
  search: ColumnType<string, never, never>;
}

export interface MemoryKnowledgeTable {
  agent_id: string;
  title: string;
  content: string;
  /** Display order: creation order. */
  position: Generated<string>;
  created_at: CreatedAt;
  updated_at: Timestamp;
  /** Generated: to_tsvector('english', title || ' ' || content). */
  search: ColumnType<string, never, never>;
}

export interface MemoryDailyLogsTable {
  agent_id: string;
  /** The agent's local day, YYYY-MM-DD. */
  day: ColumnType<string, string, string>;
  /** `daily-report`. Audit only: never read back into prompts. */
  kind: string;
  content: string;
  session_id: string | null;
  created_at: CreatedAt;
}

export interface MemoryConsolidationsTable {
  id: Generated<string>;
  agent_id: string;
  day: ColumnType<string, string, string>;
  session_id: string;
  /** planning → applied | rejected (malformed or out-of-bounds plan: nothing changed). */
  status: 'planning' | 'applied' | 'rejected';
  reason: string | null;
  entries_offered: number;
  removed: Generated<number>;
  merged: Generated<number>;
  promoted: Generated<number>;
  /** The entries the dream was shown: the only ids its plan may name. */
  offered_ids: ColumnType<string[], string[] | undefined, string[]>;
  /** The plan as the model wrote it (JSON when it parsed, else `{ raw }`). */
  plan: ColumnType<unknown, string | null | undefined, string | null>;
  created_at: CreatedAt;
  finished_at: NullableTimestamp;
}

export interface MemoryReflectionsTable {
  task_id: string;
  agent_id: string;
  day: ColumnType<string, string, string>;
  /** running | completed | rate-limited */
  status: string;
  session_id: string | null;
  tool_iterations: Generated<number>;
  created_at: CreatedAt;
  finished_at: NullableTimestamp;
}

export interface HeartbeatRunsTable {
  id: Generated<string>;
  agent_id: string;
  workflow_id: string;
  session_id: string | null;
  /** skipped (idle) | ok (HEARTBEAT_OK) | acted | iteration-cap */
  outcome: string;
  fingerprint: string;
  skipped_in_row: number;
  tool_iterations: number;
  summary: string | null;
  created_at: CreatedAt;
}

export interface AgentFileEditsTable {
  id: Generated<string>;
  agent_id: string;
  /** The run (session) that made the edit: one edit per file per run. */
  run_id: string;
  file: string;
  task_id: string | null;
  before_hash: string;
  after_hash: string;
  /** Line diff, cut to 5 KB. */
  diff: string;
  created_at: CreatedAt;
}

// ---- context engine ------------------------------------------------------------------------------

/** A conversation summary made by prepareMessages, reused while its folded prefix is unchanged. */
export interface SessionSummariesTable {
  session_id: string;
  /** sha256 chained over the folded messages. */
  prefix_hash: string;
  /** How many messages of the prepared conversation the summary folds. */
  prefix_length: number;
  /** The summary message text, label included. */
  text: string;
  source: 'llm' | 'heuristic';
  created_at: CreatedAt;
}

/** The last sequence number handed out per stream (migration 006). */
export interface StreamHeadsTable {
  stream_id: string;
  last_seq: number;
  updated_at: Timestamp;
}

/** A run stream's deltas and events (migration 006); see activities/streams/. */
export interface StreamEventsTable {
  stream_id: string;
  seq: number;
  kind: 'step-start' | 'delta' | 'rewind' | 'step-end' | 'event' | 'end';
  step_key: string | null;
  attempt: Generated<number>;
  part: Generated<number>;
  text: string | null;
  data: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  agent_id: string | null;
  task_id: string | null;
  created_at: CreatedAt;
}

/** An agent's mailbox (migration 006); see workflows/agent.ts and workflows/rules/mailbox.ts. */
export interface MailboxItemsTable {
  id: string;
  agent_id: string;
  kind: string;
  from_type: string;
  from_id: string;
  channel: string;
  text: string;
  reply_to: string | null;
  thread_id: string;
  task_id: string | null;
  priority: number;
  status: string;
  decision: string;
  reason: Generated<string>;
  merged_into: string | null;
  merged_count: Generated<number>;
  run_id: string | null;
  result: string | null;
  /** The delivery's idempotency key (migration 041): unique per agent, so a retried delivery finds this item. */
  idempotency_key: ColumnType<string | null, string | null | undefined, never>;
  /** The sha256 of the text as delivered with a key, to refuse the key reused for another message. */
  idempotency_text_sha256: ColumnType<string | null, string | null | undefined, never>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** HTTP API bearer tokens: only the sha256 of the secret is stored. */
/** The inbox's sign-in sessions (migration 021): the cookie holds the random id, the row its hash. */
export interface InboxSessionsTable {
  id_hash: string;
  name: string;
  scope: 'operator' | 'service' | 'read';
  token_id: string | null;
  csrf_token: string;
  created_at: CreatedAt;
  expires_at: Timestamp;
  /** Migration 031: the OIDC groups the person signed in with (JSON array of strings); null for a token's session. */
  groups: ColumnType<string[] | null, string | null | undefined, string | null>;
  /** The organisation the person acts for; null for the platform operator (spans organisations). */
  org: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Single sign-on logins under way (migration 021): one row per authorization request, used once. */
export interface InboxSsoLoginsTable {
  state_hash: string;
  code_verifier: string;
  nonce: string;
  expires_at: Timestamp;
}

export interface ApiTokensTable {
  id: string;
  /** Unique; approvals and reviews decided with the token record this name. */
  name: string;
  scope: 'operator' | 'service' | 'read';
  token_hash: string;
  /** The organisation the token acts for; null for a platform token (the only kind that spans). */
  org: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
  last_used_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
}

/** Group chat channels (migration 007); see activities/mailbox/group.ts. */
export interface GroupChannelsTable {
  name: string;
  created_by: string;
  created_at: CreatedAt;
}

export interface GroupMembersTable {
  group_name: string;
  member_type: string;
  member_id: string;
  joined_at: CreatedAt;
}

export interface GroupMessagesTable {
  id: string;
  group_name: string;
  from_type: string;
  from_id: string;
  text: string;
  reply_to: string | null;
  turn_id: string;
  depth: number;
  delivered_to: ColumnType<string[], string | undefined, string>;
  routing: Generated<string>;
  seq: Generated<string>;
  created_at: CreatedAt;
}

export interface Database {
  agents: AgentsTable;
  tasks: TasksTable;
  task_events: TaskEventsTable;
  sessions: SessionsTable;
  messages: MessagesTable;
  tool_calls: ToolCallsTable;
  tool_outputs: ToolOutputsTable;
  mcp_tool_snapshots: McpToolSnapshotsTable;
  tool_result_images: ToolResultImagesTable;
  workspace_remotes: WorkspaceRemotesTable;
  approvals: ApprovalsTable;
  approval_events: ApprovalEventsTable;
  llm_calls: LlmCallsTable;
  memory_notebook: MemoryNotebookTable;
  memory_observations: MemoryObservationsTable;
  memory_knowledge: MemoryKnowledgeTable;
  memory_daily_logs: MemoryDailyLogsTable;
  memory_consolidations: MemoryConsolidationsTable;
  memory_reflections: MemoryReflectionsTable;
  heartbeat_runs: HeartbeatRunsTable;
  agent_file_edits: AgentFileEditsTable;
  session_summaries: SessionSummariesTable;
  task_dependencies: TaskDependenciesTable;
  notifications: NotificationsTable;
  goals: GoalsTable;
  stream_heads: StreamHeadsTable;
  stream_events: StreamEventsTable;
  mailbox_items: MailboxItemsTable;
  api_tokens: ApiTokensTable;
  inbox_sessions: InboxSessionsTable;
  inbox_sso_logins: InboxSsoLoginsTable;
  group_channels: GroupChannelsTable;
  group_members: GroupMembersTable;
  group_messages: GroupMessagesTable;
  skills: SkillsTable;
  skill_bindings: SkillBindingsTable;
  skill_activations: SkillActivationsTable;
  organisations: OrganisationsTable;
  user_profiles: UserProfilesTable;
  announcements: AnnouncementsTable;
  task_forks: TaskForksTable;
  fork_tool_calls: ForkToolCallsTable;
  evals: EvalsTable;
  eval_runs: EvalRunsTable;
}

// ---- forks and evals (migration 025) -------------------------------------------------------------

/** A fork of a recorded task: what it was copied from and where its own workspace is. */
export interface TaskForksTable {
  task_id: string;
  source_task_id: string;
  source_session_id: string;
  at_step: number;
  overrides: JSONColumnType<Record<string, unknown>>;
  allow_tools: JSONColumnType<string[]>;
  workspace_dir: string;
  workspace_note: string;
  copied_tool_calls: number;
  incomplete_calls: JSONColumnType<Array<{ position: number; tool: string; toolCallId: string }>>;
  created_at: CreatedAt;
}

/** A fork's report, call by call. */
export interface ForkToolCallsTable {
  session_id: string;
  tool_call_id: string;
  fork_task_id: string;
  position: number;
  tool: string;
  outcome: 'replayed' | 'executed' | 'refused';
  source_tool_call_id: string | null;
  note: string | null;
  created_at: CreatedAt;
}

export interface EvalsTable {
  id: string;
  workflow_id: string;
  selection: JSONColumnType<Record<string, unknown>>;
  candidates: JSONColumnType<unknown[]>;
  budget_usd: ColumnType<string | null, number | string | null | undefined, number | string | null>;
  state: 'running' | 'completed' | 'failed';
  spent_usd: Numeric;
  totals: ColumnType<unknown, string | null | undefined, string | null>;
  created_at: CreatedAt;
  finished_at: NullableTimestamp;
}

export interface EvalRunsTable {
  eval_id: string;
  source_task_id: string;
  candidate: string;
  fork_task_id: string;
  state: 'running' | 'graded' | 'skipped' | 'failed';
  result: ColumnType<unknown, string | null | undefined, string | null>;
  created_at: CreatedAt;
}

// ---- skills and organisations (migration 009) ----------------------------------------------------

/** A skill (SKILL.md): front matter name / description / category and the instructions body. */
export interface SkillsTable {
  /** 'agent:<id>', 'org:<name>' or 'shared': who sees the skill. A name is unique per scope. */
  scope: string;
  name: string;
  category: Generated<string>;
  description: string;
  body: string;
  /** Set for an agent's own skills (deleted with the agent). */
  owner_agent_id: string | null;
  content_hash: string;
  /** MCP servers the skill brings (`mcpServers` shape, `${NAME}` references only); null: none. */
  mcp_servers: ColumnType<unknown, string | null | undefined, string | null>;
  updated_at: Timestamp;
}

/** Skills bound to an agent: always in its prompt (Active Skills, progressive disclosure). */
export interface SkillBindingsTable {
  agent_id: string;
  skill_name: string;
  created_at: CreatedAt;
}

/** What discover_tools activated in a session (and its task): a skill's full body, or a withheld tool. */
export interface SkillActivationsTable {
  session_id: string;
  kind: 'skill' | 'tool';
  name: string;
  agent_id: string;
  task_id: string | null;
  created_at: CreatedAt;
}

/** An organisation folder: CONTEXT.md and ANNOUNCEMENTS.md (team announcements and norms). */
export interface OrganisationsTable {
  name: string;
  context_md: Generated<string>;
  announcements_md: Generated<string>;
  /** The organisation's approval policies (`APPROVALS.json`, migration 023); null without. */
  approvals: ColumnType<unknown, string | null | undefined, string | null>;
  /** MCP servers every agent of the organisation gets (`mcpServers` shape, `${NAME}` references only). */
  mcp_servers: ColumnType<unknown, string | null | undefined, string | null>;
  updated_at: Timestamp;
}

/** `users/*.md` of an organisation folder: the humans the agents work with. */
export interface UserProfilesTable {
  org: string;
  handle: string;
  name: string;
  profile_md: string;
}

/** System announcements (Tier 3), for one organisation or everyone, until they expire. */
export interface AnnouncementsTable {
  id: Generated<string>;
  org: string | null;
  text: string;
  created_at: CreatedAt;
  expires_at: Date | null;
}

export type AgentRow = Selectable<AgentsTable>;
export type NewAgent = Insertable<AgentsTable>;
export type TaskRow = Selectable<TasksTable>;
export type TaskUpdate = Updateable<TasksTable>;
export type MessageRow = Selectable<MessagesTable>;
export type ToolCallRow = Selectable<ToolCallsTable>;
export type ApprovalRow = Selectable<ApprovalsTable>;
export type NotificationRow = Selectable<NotificationsTable>;
export type GoalRow = Selectable<GoalsTable>;
