import { randomUUID } from 'node:crypto';
import path from 'node:path';
import {
  type Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  type WorkflowHandle,
} from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database, TaskRow } from '../schema/database';
import {
  AGENT_ID_PATTERN,
  findAgent,
  IDENTITY_FILES,
  upsertAgent,
  type AgentConfig,
  type AgentDefinition,
} from '../activities/store/agents';
import { addTaskEvent, findTask } from '../activities/store/tasks';
import { readSkillsFolder, upsertSkills, type SkillDefinition } from '../activities/store/skills';
import { postAnnouncement, readOrganisationFolder, upsertOrganisation } from '../activities/store/organisations';
import { usageTotals, type UsageTotalsRow } from '../activities/llm/usage';
import { recordedRoundProgress } from '../activities/store/round-progress';
import {
  AgentIdSearchAttribute,
  approvalDecisionSignal,
  decideApprovalUpdate,
  DEFAULT_TASK_QUEUE,
  pauseSignal,
  resumeSignal,
  reviewDecisionSignal,
  roundProgressQuery,
  roundSessionId,
  roundWorkflowId,
  statusQuery,
  TaskIdSearchAttribute,
  TaskStateSearchAttribute,
  OrgIdSearchAttribute,
  taskWorkflowId,
  withLiveRound,
  type ApprovalDecision,
  type RecordedApprovalDecision,
  type RoundProgress,
  type ReviewDecision,
  type TaskPriority,
  type TaskStatus,
  type TaskWorkflowInput,
  type TaskWorkflowResult,
  ZERO_USAGE_TOTALS,
} from '../workflows/contract';
import { taskInputProblem } from '../workflows/rules/task-input';
import type { taskWorkflow } from '../workflows/task';
import { commentOnTask, type CommentResult } from './deliver';
import {
  approvalDecided,
  BudgetDecisionRejectedError,
  InvalidTaskInputError,
  innermostMessage,
  notInReview,
  taskFinished,
  unknownApprovalRequest,
  unknownTask,
  UnknownAgentError,
} from './errors';
import { recordedSpend, withRecordedBudgetSpend, withRecordedSpend } from './spend';
import { isTerminal, type TaskState } from '../workflows/rules/task-state';
import { recordNewTask } from '../activities/store/task-graph';
import { readUserTextFile } from '../activities/store/user-files';
import type { WorkspaceRoots } from '../activities/store/workspace-roots';
import type { DeliverInput } from '../workflows/agent-contract';
import {
  delegateApprovalUpdate,
  type ApprovalDelegationRequest,
  type RecordedApprovalDelegation,
} from '../workflows/approval-contract';
import {
  budgetQuery,
  decideBudgetUpdate,
  type BudgetDecision,
  type BudgetReport,
  type RecordedBudgetDecision,
} from '../workflows/subagent-contract';
import { FailureType } from '../workflows/failure-types';

export * from '../workflows/contract';
export type { AgentConfig, AgentDefinition } from '../activities/store/agents';
export { AgentConfigSchema, AgentDefinitionSchema, InvalidAgentError } from '../activities/store/agents';

/**
 * How long `getStatus` waits for a running round's `progress` query before it reads what the round's
 * steps recorded. An idle or waiting round answers in milliseconds; one in a chain of local steps
 * answers only when the chain ends (up to LOCAL_STEP_CHAIN_MAX_MS).
 */
export const ROUND_PROGRESS_WAIT_MS = 500;

/** `agent.json`, if present: `{ name?, description?, config? }`; anything else is refused in words. */
function parseManifest(
  folder: string,
  text: string | undefined,
): { name?: string; description?: string; config?: AgentConfig } {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${path.join(folder, 'agent.json')} is not valid JSON: ${(error as Error).message}`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new Error(`${path.join(folder, 'agent.json')} must be an object { name?, description?, config? }`);
  const unknown = Object.keys(value).filter((k) => !['name', 'description', 'config'].includes(k));
  if (unknown.length)
    throw new Error(
      `${path.join(folder, 'agent.json')} has unknown key(s) ${unknown.join(', ')}; allowed: name, description, config`,
    );
  return value as { name?: string; description?: string; config?: AgentConfig };
}

export {
  apiAnswerOf,
  BudgetDecisionRejectedError,
  DeliveryRejectedError,
  InvalidTaskInputError,
  innermostMessage,
  TaskRefusedError,
  UnknownAgentError,
  type ApiAnswer,
} from './errors';
export { TaskGraphError } from '../activities/store/task-graph';
export type { CommentResult } from './deliver';

/** The task id is taken: a task id runs once (starting it again would not start new work). */
export class TaskExistsError extends Error {
  readonly type = FailureType.TaskConflict;
  constructor(readonly taskId: string) {
    super(`task ${JSON.stringify(taskId)} already exists: a task id runs once; start a new task or follow this one`);
    this.name = 'TaskExistsError';
  }
}

export interface StartTaskOptions {
  agentId: string;
  title: string;
  description: string;
  /** Defaults to a random id. Starting the same id twice is refused (`TaskExistsError`). */
  taskId?: string;
  priority?: TaskPriority;
  createdBy?: string;
  /** How long a tool call waits for a human decision (default 24 h). */
  approvalTimeoutMs?: number;
  /** The task's cost budget in USD (its LLM calls and its sub-agents'); reaching it waits for `decideBudget`. */
  costBudgetUsd?: number;
  /** The task this one is a subtask of. */
  parentTaskId?: string;
  /** Tasks that must complete first: until then this one waits in `blocked`. */
  dependsOn?: string[];
}

export interface TaskEvent {
  id: string;
  /** Dense per task in commit order: the cursor to read on from (`events`, `follow`, the API's `?after=`). */
  seq: string;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/**
 * The typed client for backend services: defines agents, starts tasks and follows, steers and
 * decides them. Wraps `@temporalio/client` (the workflows) and the database (agents, tasks, events).
 */
export class AgentsClient {
  readonly taskQueue: string;
  /**
   * The base of organisations' workspace roots (`<root>/<org>`), where agents without a `workspaceDir`
   * get one (`<root>/<org>/<agentId>`); default AGENTS_WORKSPACE_ROOT.
   */
  readonly workspaceRoot: string | undefined;
  /**
   * The roots workspace folders are checked against (`loadConfig().workspaceRoots` in the CLI); absent:
   * read from the environment (AGENTS_WORKSPACE_ROOTS, AGENTS_WORKSPACE_ALLOWED_ROOTS, DATA_DIR) at
   * each upsert, with `workspaceRoot` as the base.
   */
  readonly workspaceRoots: WorkspaceRoots | undefined;

  constructor(
    readonly temporal: Client,
    readonly db: Kysely<Database>,
    options: { taskQueue?: string; workspaceRoot?: string; workspaceRoots?: WorkspaceRoots } = {},
  ) {
    this.taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
    this.workspaceRoot = options.workspaceRoot ?? process.env.AGENTS_WORKSPACE_ROOT;
    this.workspaceRoots = options.workspaceRoots;
  }

  /**
   * Creates or replaces an agent (identity files, config, workspace), validated first: bad input is
   * refused with `InvalidAgentError` naming every problem, before anything is written. The workspace
   * folder (`workspaceDir`, else `<workspaceRoot>/<org>/<id>`, or the `<workspaceRoot>/<id>` a
   * default-organisation agent already has) exists when this returns. A folder outside the agent's
   * organisation's root and the allowed roots, or in a system folder, a home's dot-folder, the data
   * folder or the checkout, is refused the same way (docs/configuration.md). Files the agent rewrote
   * itself with edit_agent_file are kept unless `force`; the returned hash says which files are current.
   * `workspaceRoot` replaces this client's for this call (the HTTP API's).
   */
  async upsertAgent(
    agent: AgentDefinition,
    options: { force?: boolean; skills?: SkillDefinition[]; workspaceRoot?: string } = {},
  ): Promise<{ id: string; contentHash: string; workspaceDir: string }> {
    const workspaceRoot = options.workspaceRoot ?? this.workspaceRoot;
    const row = await upsertAgent(this.db, agent, {
      workspaceRoot,
      // The configured roots hold for this client's own base; another base is read with the environment's roots.
      ...(this.workspaceRoots && workspaceRoot === this.workspaceRoot ? { workspaceRoots: this.workspaceRoots } : {}),
      force: options.force,
      ...(options.skills ? { skills: options.skills } : {}),
    });
    return { id: row.id, contentHash: row.content_hash, workspaceDir: row.workspace_dir };
  }

  /**
   * Reads SOUL.md, AGENTS.md, HEARTBEAT.md, TOOLS.md (missing ones are empty; at least SOUL.md or
   * AGENTS.md must exist) and an optional `agent.json` ({ name, description, config }) from a folder.
   */
  async upsertAgentFromFolder(
    folder: string,
    options: { id?: string; workspaceDir?: string; config?: AgentConfig; force?: boolean } = {},
  ): Promise<{ id: string; contentHash: string; workspaceDir: string }> {
    // Only regular files of a sane size: a link to /dev/zero or a pipe is refused, not read forever.
    const read = async (name: string): Promise<string | undefined> => readUserTextFile(path.join(folder, name));
    const [soul, agents, heartbeat, tools, manifest] = await Promise.all([
      read(IDENTITY_FILES.soul_md),
      read(IDENTITY_FILES.agents_md),
      read(IDENTITY_FILES.heartbeat_md),
      read(IDENTITY_FILES.tools_md),
      read('agent.json'),
    ]);
    if (soul === undefined && agents === undefined) {
      throw new Error(`${folder} has neither SOUL.md nor AGENTS.md: an agent needs at least one identity file`);
    }
    const meta = parseManifest(folder, manifest);
    // The folder's own skills (`skills/<name>/SKILL.md`): bound to this agent and seen by it only.
    const skills = await readSkillsFolder(path.join(folder, 'skills'));
    const id = options.id ?? path.basename(path.resolve(folder)).toLowerCase();
    if (!AGENT_ID_PATTERN.test(id))
      throw new Error(`agent id ${JSON.stringify(id)} (from the folder name) is invalid; pass options.id`);
    return this.upsertAgent(
      {
        id,
        name: meta.name ?? id,
        description: meta.description,
        files: { soul: soul ?? '', agents: agents ?? '', heartbeat: heartbeat ?? '', tools: tools ?? '' },
        config: { ...meta.config, ...options.config },
        workspaceDir: options.workspaceDir,
      },
      { force: options.force, skills },
    );
  }

  /**
   * Creates or updates an organisation from a folder: CONTEXT.md, ANNOUNCEMENTS.md, users/*.md and
   * shared skills in skills/<name>/SKILL.md (see activities/store/organisations.ts). Agents join it
   * with `config.org`; load it before agents whose config binds its skills.
   */
  async upsertOrganisationFromFolder(
    folder: string,
    options: { name?: string } = {},
  ): Promise<{ name: string; users: number; skills: number }> {
    const org = await readOrganisationFolder(folder, options.name);
    await upsertOrganisation(this.db, org);
    return { name: org.name, users: org.users.length, skills: org.skills.length };
  }

  /** Creates or updates shared skills from a folder of `<name>/SKILL.md` (any agent may discover them). */
  async upsertSkillsFromFolder(folder: string): Promise<{ skills: string[] }> {
    const skills = await readSkillsFolder(folder);
    if (!skills.length) throw new Error(`${folder} holds no <skill>/SKILL.md`);
    await upsertSkills(this.db, skills, 'shared');
    return { skills: skills.map((s) => s.name) };
  }

  /** Posts a system announcement to every agent of `org` (or every agent) until `expiresAt`; Tier 3 of their prompts. */
  async announce(text: string, options: { org?: string; expiresAt?: Date } = {}): Promise<{ id: string }> {
    return { id: await postAnnouncement(this.db, { text, ...options }) };
  }

  /**
   * Starts the task's workflow `task-{taskId}`, which records the task row itself (the same contract a
   * raw Temporal client uses). Checked here first, for a fast error before any workflow runs: the
   * agent must exist (`UnknownAgentError`), the input must be valid, and the task id must be new
   * (`TaskExistsError`: a task id runs once).
   */
  async startTask(
    options: StartTaskOptions,
  ): Promise<{ taskId: string; workflowId: string; handle: WorkflowHandle<typeof taskWorkflow> }> {
    const agent = await findAgent(this.db, options.agentId);
    if (!agent) throw new UnknownAgentError(options.agentId);
    if (!options.title.trim()) throw new InvalidTaskInputError('a task needs a title');
    const taskId = options.taskId ?? randomUUID();
    const input: TaskWorkflowInput = {
      taskId,
      agentId: agent.id,
      title: options.title,
      description: options.description,
      priority: options.priority,
      createdBy: options.createdBy,
      approvalTimeoutMs: options.approvalTimeoutMs,
      ...(options.costBudgetUsd !== undefined ? { costBudgetUsd: options.costBudgetUsd } : {}),
    };
    const problem = taskInputProblem(input, taskId);
    if (problem) throw new InvalidTaskInputError(problem);
    if (await findTask(this.db, taskId)) throw new TaskExistsError(taskId);
    if (options.parentTaskId !== undefined || options.dependsOn?.length) {
      // Its place in the graph is recorded (validated: unknown parent or dependency → TaskGraphError)
      // before the workflow starts, which then finds its row.
      await recordNewTask(this.db, {
        id: taskId,
        agentId: agent.id,
        title: options.title,
        description: options.description,
        priority: options.priority ?? 'medium',
        createdBy: options.createdBy ?? 'human',
        ...(options.parentTaskId !== undefined ? { parentTaskId: options.parentTaskId } : {}),
        ...(options.dependsOn?.length ? { dependsOn: options.dependsOn } : {}),
      });
    }
    const workflowId = taskWorkflowId(taskId);
    try {
      const handle = await this.temporal.workflow.start<typeof taskWorkflow>('taskWorkflow', {
        workflowId,
        taskQueue: this.taskQueue,
        args: [input],
        // A finished task's id is not reused either (the workflow would refuse it anyway).
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        typedSearchAttributes: [
          { key: AgentIdSearchAttribute, value: agent.id },
          { key: TaskIdSearchAttribute, value: taskId },
          { key: TaskStateSearchAttribute, value: 'pending' },
          { key: OrgIdSearchAttribute, value: agent.org },
        ],
        staticSummary: `${agent.name}: ${options.title}`.slice(0, 200),
      });
      return { taskId, workflowId, handle };
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) throw new TaskExistsError(taskId);
      throw error;
    }
  }

  handle(taskId: string): WorkflowHandle<typeof taskWorkflow> {
    return this.temporal.workflow.getHandle<typeof taskWorkflow>(taskWorkflowId(taskId));
  }

  /**
   * Live status from the workflow (`status` query), with the running round's own progress merged in
   * (iteration, phase, budget hold: `roundProgress`); falls back to the stored row once the workflow
   * is gone. Its usage, and its budget's total, are the recorded calls' (client/spend.ts), as every
   * view of spend shows them.
   */
  async getStatus(taskId: string): Promise<TaskStatus> {
    const [status, spend] = await Promise.all([this.workflowStatus(taskId), recordedSpend(this.db, taskId)]);
    return withRecordedSpend(status, spend);
  }

  private async workflowStatus(taskId: string): Promise<TaskStatus> {
    try {
      const status = await this.handle(taskId).query(statusQuery);
      if (status.state !== 'in_progress' || status.round === 0) return status;
      const live = await this.roundProgress(status);
      return live ? withLiveRound(status, live) : status;
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
      const task = await this.getTaskRow(taskId);
      return {
        taskId,
        agentId: task.agent_id,
        state: task.state as TaskStatus['state'],
        round: task.round,
        iteration: 0,
        phase: 'finished',
        pendingApprovals: [],
        usage: ZERO_USAGE_TOTALS,
        ...(task.last_error ? { lastError: task.last_error } : {}),
      };
    }
  }

  /**
   * The running round's progress: its `progress` query, or, when that does not answer within
   * ROUND_PROGRESS_WAIT_MS, what its steps recorded. A query waits for the round's open workflow task,
   * which a chain of local steps holds for up to LOCAL_STEP_CHAIN_MAX_MS (5 s); the recorded progress
   * has the iteration and usage the steps wrote, the phase `thinking` (the round is running steps) and
   * the tree's spend as the round last reported it. Undefined when the round has ended or not started:
   * the task's own answer stands then.
   */
  private async roundProgress(status: TaskStatus): Promise<RoundProgress | undefined> {
    const asked = Date.now();
    try {
      return await this.temporal.withDeadline(asked + ROUND_PROGRESS_WAIT_MS, () =>
        this.temporal.workflow.getHandle(roundWorkflowId(status.taskId, status.round)).query(roundProgressQuery),
      );
    } catch {
      // Refused at once (no such run): ended or not started. Past the wait, whatever the error: busy.
      if (Date.now() - asked < ROUND_PROGRESS_WAIT_MS) return undefined;
      const recorded = await recordedRoundProgress(this.db, roundSessionId(status.taskId, status.round));
      if (!recorded) return undefined;
      return {
        round: status.round,
        iteration: recorded.iteration,
        phase: 'thinking',
        usage: recorded.usage,
        pendingApprovals: [],
        ...(status.budget ? { budget: status.budget } : {}),
      };
    }
  }

  async getTaskRow(taskId: string): Promise<TaskRow> {
    const task = await this.db.selectFrom('tasks').selectAll().where('id', '=', taskId).executeTakeFirst();
    if (!task) throw unknownTask(taskId);
    return task;
  }

  /**
   * Refuses what a task can no longer take, in the API's words: `what` ("cancellation") to a task that
   * has ended (`task_finished`), anything to a task that does not exist (`task_not_found`). A task whose
   * workflow started but has not written its row yet passes.
   */
  private async assertTakes(taskId: string, what: string): Promise<{ state: string } | undefined> {
    const task = await this.db.selectFrom('tasks').select('state').where('id', '=', taskId).executeTakeFirst();
    if (task && isTerminal(task.state as TaskState)) throw taskFinished(taskId, task.state, what);
    if (!task)
      await this.handle(taskId)
        .describe()
        .catch(() => Promise.reject(unknownTask(taskId)));
    return task;
  }

  /** An approval request the task can still take a decision or delegation on. */
  private async assertPendingApproval(taskId: string, requestId: string, what: string): Promise<void> {
    await this.assertTakes(taskId, what);
    const row = await this.db
      .selectFrom('approvals')
      .select(['status', 'task_id'])
      .where('id', '=', requestId)
      .executeTakeFirst();
    if (!row || (row.task_id !== null && row.task_id !== taskId)) throw unknownApprovalRequest(requestId);
    if (row.status !== 'pending') throw approvalDecided(requestId, row.status);
  }

  /** Requests cancellation: stops an in-flight LLM stream or command and leaves the task `cancelled`. */
  async cancel(taskId: string): Promise<void> {
    await this.assertTakes(taskId, 'cancellation');
    await this.handle(taskId).cancel();
  }

  /** Decides a pending approval through the validated update; returns the recorded decision. */
  async decideApproval(taskId: string, decision: ApprovalDecision): Promise<RecordedApprovalDecision> {
    await this.assertPendingApproval(taskId, decision.requestId, 'an approval decision');
    return this.handle(taskId).executeUpdate(decideApprovalUpdate, { args: [decision] });
  }

  /** Hands a pending request under a policy to a colleague, who then decides as if asked (validated update). */
  async delegateApproval(taskId: string, delegation: ApprovalDelegationRequest): Promise<RecordedApprovalDelegation> {
    await this.assertPendingApproval(taskId, delegation.requestId, 'a delegation');
    return this.handle(taskId).executeUpdate(delegateApprovalUpdate, { args: [delegation] });
  }

  /** Same decision by signal (fire-and-forget; unknown ids are ignored by the workflow). */
  async signalApproval(taskId: string, decision: ApprovalDecision): Promise<void> {
    await this.handle(taskId).signal(approvalDecisionSignal, decision);
  }

  /**
   * Accepts the submitted work or asks for a revision. Refused (`not_in_review`) unless the task waits
   * for review; the decision is on the task's timeline as `review-decided`.
   */
  async review(taskId: string, decision: ReviewDecision): Promise<void> {
    const task = await this.getTaskRow(taskId);
    if (task.state !== 'review') throw notInReview(taskId, task.state);
    await this.handle(taskId).signal(reviewDecisionSignal, decision);
    await addTaskEvent(this.db, taskId, 'review-decided', {
      decision: decision.decision,
      ...(decision.feedback ? { feedback: decision.feedback } : {}),
      ...(decision.decidedBy ? { decidedBy: decision.decidedBy } : {}),
    });
  }

  /** Pauses the task (→ blocked) after its current step; `resume` continues the same round and session. */
  async pause(taskId: string, reason?: string): Promise<void> {
    await this.assertTakes(taskId, 'a pause');
    await this.handle(taskId).signal(pauseSignal, { reason });
  }

  async resume(taskId: string): Promise<void> {
    await this.assertTakes(taskId, 'a resume');
    await this.handle(taskId).signal(resumeSignal);
  }

  /**
   * The tree's budget: its limit, whether it holds, and its nodes (the round and each sub-agent) as the
   * workflow reports them; its total is the recorded calls' (client/spend.ts), the same figure as the
   * status's. While a round runs, its own report (the live one the status shows) answers.
   */
  async getBudget(taskId: string): Promise<BudgetReport> {
    const [status, spend] = await Promise.all([this.workflowStatus(taskId), recordedSpend(this.db, taskId)]);
    if (status.budget) return withRecordedBudgetSpend(status.budget, spend);
    const reported = await this.handle(taskId)
      .query(budgetQuery)
      .catch(async (error: unknown) => {
        if (!(error instanceof WorkflowNotFoundError)) throw error;
        const granted = (await this.getTaskRow(taskId)).cost_budget_usd;
        return { limitUsd: granted === null ? null : Number(granted), spentUsd: 0, held: false, nodes: [] };
      });
    return withRecordedBudgetSpend(reported, spend);
  }

  /**
   * Answers a tree that holds at its cost budget, through the `decideBudget` update: `raise` (with
   * `newLimitUsd` above what was spent) lets every node continue; `stop` cancels the sub-agents and fails
   * the task (`BudgetStopped`). A decision the tree would ignore (no round running, a raise not above
   * the spend) is refused with `BudgetDecisionRejectedError` naming why; nothing is sent then.
   */
  async decideBudget(taskId: string, decision: BudgetDecision): Promise<RecordedBudgetDecision> {
    await this.assertTakes(taskId, 'a budget decision');
    try {
      return await this.handle(taskId).executeUpdate(decideBudgetUpdate, { args: [decision] });
    } catch (error) {
      if (error instanceof WorkflowUpdateFailedError)
        throw new BudgetDecisionRejectedError(innermostMessage(error), error);
      throw error;
    }
  }

  /**
   * A person's comment on a task, routed like every comment: the task's agent gets it (its running
   * round sees it, and it answers in the thread) and each other agent the text @mentions gets a
   * `mention` item it answers in the thread. `from` is the person's name (default "user"). Throws
   * `DeliveryRejectedError` for an unknown task or bad text: nothing was stored then.
   */
  async comment(taskId: string, text: string, from: string | DeliverInput['from'] = 'user'): Promise<CommentResult> {
    return commentOnTask(this, taskId, text, typeof from === 'string' ? { type: 'human', id: from } : from);
  }

  async result(taskId: string): Promise<TaskWorkflowResult> {
    return this.handle(taskId).result();
  }

  /**
   * Task events after sequence number `afterSeq` (the durable timeline: state changes, LLM calls, tools,
   * approvals, comments, review decisions). Read by `seq`, as the API's `?after=` is: ids are drawn
   * before their rows commit, so an event with a lower id can commit after one with a higher id, and a
   * reader paging by id would skip it; `seq` is given in commit order.
   */
  async events(taskId: string, afterSeq: string | number = 0): Promise<TaskEvent[]> {
    const rows = await this.db
      .selectFrom('task_events')
      .select(['id', 'seq', 'type', 'data', 'created_at'])
      .where('task_id', '=', taskId)
      .where('seq', '>', String(afterSeq) as never)
      .orderBy('seq')
      .execute();
    return rows.map((r) => ({ id: r.id, seq: String(r.seq), type: r.type, data: r.data, createdAt: r.created_at }));
  }

  /**
   * Follows a task: yields each new event and status change until the task reaches one of `until`
   * (default: review or any terminal state). Polls every `intervalMs`.
   */
  async *follow(
    taskId: string,
    options: { until?: TaskStatus['state'][]; intervalMs?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<{ kind: 'event'; event: TaskEvent } | { kind: 'status'; status: TaskStatus }> {
    const until = options.until ?? ['review', 'completed', 'failed', 'cancelled', 'rejected', 'archived'];
    let afterSeq = '0';
    let lastStatus = '';
    for (;;) {
      for (const event of await this.events(taskId, afterSeq)) {
        afterSeq = event.seq;
        yield { kind: 'event', event };
      }
      const status = await this.getStatus(taskId);
      const key = JSON.stringify([status.state, status.phase, status.iteration, status.pendingApprovals.length]);
      if (key !== lastStatus) {
        lastStatus = key;
        yield { kind: 'status', status };
      }
      if (until.includes(status.state)) return;
      if (options.signal?.aborted) return;
      await new Promise((r) => setTimeout(r, options.intervalMs ?? 500));
    }
  }

  /** An agent's LLM spend (tokens by kind, cost, call count), optionally since a date. */
  async agentUsage(agentId: string, options: { since?: Date } = {}): Promise<UsageTotalsRow> {
    return usageTotals(this.db, { agentId, since: options.since });
  }
}
export * from './streams';
export {
  ForkClient,
  ForkError,
  EvalError,
  type ForkTaskOptions,
  type ForkStarted,
  type ForkReport,
  type StartEvalOptions,
} from './forks';
