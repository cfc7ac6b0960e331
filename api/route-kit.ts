/**
 * What the route modules of the HTTP API share: the `route()` definer (scope check, zod validation,
 * OpenAPI entry), Temporal calls under the API's timeout, and the lookups that turn a missing agent or
 * task, or another organisation's, into a 404 before anything is sent to a workflow (api/org-walls.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { z } from 'zod';
import type { AgentsClient } from '../client';
import type { AgentRow, Database } from '../schema/database';
import type { ApiPrincipal, TokenScope } from './tokens';
import type { RunStreams } from './sse';

export type Handler<P, Q, B> = (ctx: {
  params: P;
  query: Q;
  body: B;
  principal: ApiPrincipal;
  request: FastifyRequest;
  reply: FastifyReply;
}) => Promise<unknown>;

export interface RouteSpec<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> {
  method: 'GET' | 'POST' | 'PUT';
  url: string;
  scope: TokenScope;
  summary: string;
  params?: P;
  query?: Q;
  body?: B;
  response?: z.ZodType;
  status?: number;
  stream?: boolean;
  handler: Handler<z.infer<P>, z.infer<Q>, z.infer<B>>;
}

/** Registers a route and its OpenAPI entry; the handler gets validated input and the caller's principal. */
export type DefineRoute = <
  P extends z.ZodType = z.ZodUndefined,
  Q extends z.ZodType = z.ZodUndefined,
  B extends z.ZodType = z.ZodUndefined,
>(
  spec: RouteSpec<P, Q, B>,
) => void;

export interface ApiContext {
  app: FastifyInstance;
  client: AgentsClient;
  db: Kysely<Database>;
  route: DefineRoute;
  runStreams: RunStreams;
  /** A PostgreSQL server URL for LISTEN; absent, followers poll. */
  databaseUrl?: string;
  /** Default workspace folder for agents upserted without one: `<root>/<agentId>`. */
  workspaceRoot: string;
  /** Runs Temporal calls with the API's timeout: 504 (and the gRPC call cancelled) when it passes. */
  withTimeout<T>(what: string, call: () => Promise<T>): Promise<T>;
  /**
   * The agent's row when `principal` reaches it (its own organisation's, or any for the platform), or
   * 404 `agent_not_found`: another organisation's agent answers exactly as one that never existed.
   */
  requireAgent(agentId: string, principal: ApiPrincipal): Promise<AgentRow>;
  /**
   * The task's row when `principal` reaches it (a task whose workflow runs but has not written its row
   * yet counts as pending, for the organisation its `OrgId` names), or 404 `task_not_found`.
   */
  requireTask(taskId: string, principal: ApiPrincipal): Promise<{ state: string }>;
  /** Sends to a running task `principal` reaches; a finished task answers 409, so nothing is silently lost. */
  signalTask(taskId: string, principal: ApiPrincipal, what: string, send: () => Promise<void>): Promise<{ ok: true }>;
}
