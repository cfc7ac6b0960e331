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
}

export interface TaskEventsTable {
  id: Generated<string>;
  task_id: string;
  /** noun-verb: `task-created`, `state-changed`, `llm-call-finished`, `tool-call-finished`, `approval-requested` … */
  type: string;
  data: JSONColumnType<Record<string, unknown>>;
  /** Unique per task when set: makes an activity's event write idempotent across retries. */
  idem_key: string | null;
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
  started_at: CreatedAt;
  completed_at: NullableTimestamp;
}

export interface ToolOutputsTable {
  id: string;
  session_id: string;
  tool_call_id: string;
  content: string;
  chars: number;
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
  status: 'pending' | 'approved' | 'rejected' | 'timed_out';
  requested_at: CreatedAt;
  decided_at: NullableTimestamp;
  decided_by: string | null;
  comment: string | null;
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

export interface Database {
  agents: AgentsTable;
  tasks: TasksTable;
  task_events: TaskEventsTable;
  sessions: SessionsTable;
  messages: MessagesTable;
  tool_calls: ToolCallsTable;
  tool_outputs: ToolOutputsTable;
  approvals: ApprovalsTable;
  llm_calls: LlmCallsTable;
}

export type AgentRow = Selectable<AgentsTable>;
export type NewAgent = Insertable<AgentsTable>;
export type TaskRow = Selectable<TasksTable>;
export type TaskUpdate = Updateable<TasksTable>;
export type MessageRow = Selectable<MessagesTable>;
export type ToolCallRow = Selectable<ToolCallsTable>;
export type ApprovalRow = Selectable<ApprovalsTable>;
