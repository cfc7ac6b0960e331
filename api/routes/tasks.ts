/** `/v1/tasks`: start, status, usage, the timeline and the text as SSE, cancel, pause, resume, comment, review. */
import type { Kysely } from 'kysely';
import { findTask } from '../../activities/store/tasks';
import { checkNewTaskPlace } from '../../activities/store/task-graph';
import { usageTotals } from '../../activities/llm/usage';
import type { Database } from '../../schema/database';
import { BudgetDecisionRejectedError, DeliveryRejectedError } from '../../client';
import { isTerminal, type TaskState } from '../../workflows/rules/task-state';
import { ApiError } from '../errors';
import type { ApiContext } from '../route-kit';
import * as S from '../schemas';
import { openSse, resumeAfter, streamEnded } from '../sse';
import { followTaskText, readTaskEvents, taskTextEnded, type TaskEventHub } from '../streams';

export function registerTaskRoutes(
  { route, client, db, databaseUrl, runStreams, withTimeout, requireAgent, requireTask, signalTask }: ApiContext,
  events: TaskEventHub,
): void {
  const streamSource: { db: Kysely<Database>; connectionString?: string } = {
    db,
    ...(databaseUrl ? { connectionString: databaseUrl } : {}),
  };
  route({
    method: 'POST',
    url: '/v1/tasks',
    scope: 'service',
    summary: 'Start a task (workflow task-{taskId}); createdBy is the token name',
    body: S.StartTaskBody,
    response: S.StartTaskResponse,
    status: 201,
    handler: async ({ body, principal }) => {
      // Another organisation's agent is unknown here; a parent or a dependency of another organisation
      // than the agent's is refused exactly as one that does not exist (the store's own check and words).
      const agent = await requireAgent(body.agentId, principal);
      await checkNewTaskPlace(db, {
        agentId: agent.id,
        org: agent.org,
        ...(body.parentTaskId ? { parentTaskId: body.parentTaskId } : {}),
        ...(body.dependsOn ? { dependsOn: body.dependsOn } : {}),
      });
      // Task ids are one namespace across organisations: a taken id says only that it is taken.
      if (body.taskId && (await findTask(db, body.taskId)))
        throw new ApiError(409, 'task_exists', `task ${body.taskId} already exists; omit taskId for a fresh one`);
      const { taskId, workflowId } = await withTimeout('starting the task', () =>
        client.startTask({ ...body, description: body.description ?? body.title, createdBy: principal.name }),
      );
      return { taskId, workflowId };
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId',
    scope: 'read',
    summary: 'Live status (the workflow `status` query; the stored row once the workflow is gone)',
    params: S.TaskIdParams,
    response: S.TaskStatusSchema,
    handler: async ({ params, principal }) => {
      await requireTask(params.taskId, principal);
      return withTimeout('the status query', () => client.getStatus(params.taskId));
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId/usage',
    scope: 'read',
    summary: "A task's LLM tokens, cost and call count",
    params: S.TaskIdParams,
    response: S.UsageResponse,
    handler: async ({ params, principal }) => {
      await requireTask(params.taskId, principal);
      return usageTotals(db, { taskId: params.taskId });
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId/events',
    scope: 'read',
    summary:
      'The task timeline. JSON by default (`?after=<seq>`); with `Accept: text/event-stream`, Server-Sent Events whose ids are the sequence numbers, resumable with `Last-Event-ID`, ending with an `end` event once the task is finished; a reconnect after the last event of a finished task gets 204 (an EventSource then stops)',
    params: S.TaskIdParams,
    query: S.EventsQuery,
    response: S.EventsResponse,
    stream: true,
    handler: async ({ params, query, principal, request, reply }) => {
      const task = await requireTask(params.taskId, principal);
      const after = resumeAfter(request, query.after ?? 0);
      if (!(request.headers.accept ?? '').includes('text/event-stream')) {
        return { events: await readTaskEvents(db, params.taskId, after) };
      }
      let finished = isTerminal(task.state as TaskState);
      // A finished task whose events the client has all: 204, so an EventSource stops reconnecting.
      if (finished && (await readTaskEvents(db, params.taskId, after, 1)).length === 0) return streamEnded(reply);
      const sse = openSse(request, reply);
      const unsubscribe = await events.subscribe(params.taskId, after, (event) => {
        sse.send({ id: String(event.seq), data: event });
        if (event.type === 'state-changed' && isTerminal(event.data.state as TaskState)) finished = true;
      });
      sse.onClose(unsubscribe);
      // A finished task's stream ends once its backlog is sent (and once the terminal event arrives).
      const ender = setInterval(() => {
        if (finished) {
          clearInterval(ender);
          sse.end();
        }
      }, 100);
      sse.onClose(() => clearInterval(ender));
      return reply;
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId/deltas',
    scope: 'read',
    summary:
      "The LLM's text as it streams (Server-Sent Events), read from the task's stored run stream: each event's id is its sequence number in the stream, so `Last-Event-ID` resumes with no gap and no duplicate on any API process. Events: `delta` (`text`), `step-start`, `step-end`, `rewind` (an attempt that died mid-stream: drop the text of the deltas `data.fromSeq`..`data.toSeq`, the retry writes it again), then `end` once the task is finished; a reconnect after the last event of a finished task gets 204",
    params: S.TaskIdParams,
    stream: true,
    handler: async ({ params, principal, request, reply }) => {
      const task = await requireTask(params.taskId, principal);
      const after = resumeAfter(request);
      if (await taskTextEnded(db, params.taskId, task.state, after)) return streamEnded(reply);
      const sse = openSse(request, reply);
      runStreams.pipe(sse, (deliver, signal) => followTaskText(streamSource, params.taskId, after, deliver, signal));
      return reply;
    },
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/cancel',
    scope: 'operator',
    summary: 'Cancel the task (stops an in-flight LLM stream or command; the task ends cancelled)',
    params: S.TaskIdParams,
    response: S.AcceptedResponse,
    status: 202,
    handler: async ({ params, principal }) =>
      signalTask(params.taskId, principal, 'cancellation', () => client.cancel(params.taskId)),
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/pause',
    scope: 'operator',
    summary: 'Pause the task (→ blocked) after its current step',
    params: S.TaskIdParams,
    body: S.PauseBody,
    response: S.AcceptedResponse,
    status: 202,
    handler: async ({ params, body, principal }) =>
      signalTask(params.taskId, principal, 'a pause', () => client.pause(params.taskId, body.reason)),
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/resume',
    scope: 'operator',
    summary: 'Resume a paused task (same round and session)',
    params: S.TaskIdParams,
    response: S.AcceptedResponse,
    status: 202,
    handler: async ({ params, principal }) =>
      signalTask(params.taskId, principal, 'a resume', () => client.resume(params.taskId)),
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/comments',
    scope: 'service',
    summary:
      "A person's comment (from = the token name), routed like every comment: the task's agent gets it (its running round sees it; it answers in the thread) and each other agent it @mentions gets a mention item; answers the comment's item id and the agents mentioned",
    params: S.TaskIdParams,
    body: S.CommentBody,
    response: S.CommentResponse,
    status: 202,
    handler: async ({ params, body, principal }) => {
      const task = await requireTask(params.taskId, principal);
      if (isTerminal(task.state as TaskState))
        throw new ApiError(409, 'task_finished', `task ${params.taskId} is ${task.state}; it no longer takes comments`);
      const { itemId, mentioned } = await withTimeout('delivering the comment', () =>
        client.comment(params.taskId, body.text, principal.name),
      ).catch((error: unknown) => {
        if (error instanceof DeliveryRejectedError) throw new ApiError(400, 'invalid_request', error.message);
        throw error;
      });
      return { ok: true as const, itemId, mentioned };
    },
  });
  route({
    method: 'GET',
    url: '/v1/tasks/:taskId/budget',
    scope: 'read',
    summary:
      "The task tree's spend per node (its round and each sub-agent) and in total, its limit, and whether it holds for a decision (the `budget` query)",
    params: S.TaskIdParams,
    response: S.BudgetReportSchema,
    handler: async ({ params, principal }) => {
      await requireTask(params.taskId, principal);
      return withTimeout('the budget query', () => client.getBudget(params.taskId));
    },
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/budget',
    scope: 'operator',
    summary:
      'Answer a tree held at its cost budget through the validated `decideBudget` update: `raise` with `newLimitUsd` above what was spent (every node continues) or `stop` (sub-agents cancelled, the task fails `BudgetStopped`); decidedBy = the token name. 409 when the task would ignore it (no round running, a raise not above the spend)',
    params: S.TaskIdParams,
    body: S.BudgetDecisionBody,
    response: S.RecordedBudgetDecisionSchema,
    handler: async ({ params, body, principal }) => {
      const task = await requireTask(params.taskId, principal);
      if (isTerminal(task.state as TaskState))
        throw new ApiError(
          409,
          'task_finished',
          `task ${params.taskId} is ${task.state}; it no longer takes a budget decision`,
        );
      return withTimeout('the decideBudget update', () =>
        client.decideBudget(params.taskId, { ...body, decidedBy: principal.name }),
      ).catch((error: unknown) => {
        if (error instanceof BudgetDecisionRejectedError)
          throw new ApiError(409, 'invalid_budget_decision', error.message);
        throw error;
      });
    },
  });
  route({
    method: 'POST',
    url: '/v1/tasks/:taskId/review',
    scope: 'operator',
    summary: 'Accept the submitted work or ask for a revision (decidedBy = the token name)',
    params: S.TaskIdParams,
    body: S.ReviewBody,
    response: S.AcceptedResponse,
    status: 202,
    handler: async ({ params, body, principal }) => {
      const task = await requireTask(params.taskId, principal);
      if (task.state !== 'review')
        throw new ApiError(409, 'not_in_review', `task ${params.taskId} is ${task.state}, not waiting for review`);
      return signalTask(params.taskId, principal, 'a review decision', () =>
        client.review(params.taskId, { ...body, decidedBy: principal.name }),
      );
    },
  });
}
