/** `/v1/agents`: create or replace an agent, read it, list them, its usage. */
import path from 'node:path';
import { z } from 'zod';
import { findAgent } from '../../activities/store/agents';
import type { AgentRow } from '../../schema/database';
import type { ApiContext } from '../route-kit';
import * as S from '../schemas';

export function registerAgentRoutes({ route, client, db, workspaceRoot, requireAgent }: ApiContext): void {
  route({
    method: 'PUT',
    url: '/v1/agents/:agentId',
    scope: 'operator',
    summary: 'Create or replace an agent (identity files, config, workspace)',
    params: S.AgentIdParams,
    body: S.AgentUpsertBody,
    response: S.AgentSchema,
    handler: async ({ params, body }) => {
      await client.upsertAgent({
        id: params.agentId,
        name: body.name,
        description: body.description,
        files: body.files,
        config: body.config,
        workspaceDir: path.resolve(body.workspaceDir ?? path.join(workspaceRoot, params.agentId)),
      });
      return agentJson((await findAgent(db, params.agentId))!);
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId',
    scope: 'read',
    summary: 'An agent with its identity files',
    params: S.AgentIdParams,
    response: S.AgentWithFilesSchema,
    handler: async ({ params }) => {
      const agent = await requireAgent(params.agentId);
      return { ...agentJson(agent), files: { soul: agent.soul_md, agents: agent.agents_md, heartbeat: agent.heartbeat_md, tools: agent.tools_md } };
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents',
    scope: 'read',
    summary: 'Every agent',
    response: z.object({ agents: z.array(S.AgentSchema) }),
    handler: async () => ({ agents: (await db.selectFrom('agents').selectAll().orderBy('id').execute()).map(agentJson) }),
  });
  route({
    method: 'GET',
    url: '/v1/agents/:agentId/usage',
    scope: 'read',
    summary: "An agent's LLM tokens, cost and call count (optionally since an instant)",
    params: S.AgentIdParams,
    query: S.UsageQuery,
    response: S.UsageResponse,
    handler: async ({ params, query }) => {
      await requireAgent(params.agentId);
      return client.agentUsage(params.agentId, { since: query.since ? new Date(query.since) : undefined });
    },
  });
}

function agentJson(agent: AgentRow) {
  return {
    id: agent.id,
    name: agent.name,
    description: agent.description,
    contentHash: agent.content_hash,
    config: agent.config as z.infer<typeof S.AgentConfigSchema>,
    workspaceDir: agent.workspace_dir,
    createdAt: agent.created_at.toISOString(),
    updatedAt: agent.updated_at.toISOString(),
  };
}
