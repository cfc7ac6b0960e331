/** `/v1/agents`: create or replace an agent, read it, list them, its usage. */
import path from 'node:path';
import { z } from 'zod';
import { findAgent } from '../../activities/store/agents';
import { InvalidWorkspaceDirError } from '../../activities/store/workspace-dir';
import type { AgentRow } from '../../schema/database';
import { ApiError } from '../errors';
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
      // The API's working directory means nothing to a caller elsewhere: a relative path is refused.
      if (body.workspaceDir !== undefined && !path.isAbsolute(body.workspaceDir)) {
        throw new ApiError(
          400,
          'invalid_request',
          `invalid agent ${JSON.stringify(params.agentId)}: workspaceDir: ${new InvalidWorkspaceDirError(body.workspaceDir, 'it is not an absolute path').message}`,
        );
      }
      await client.upsertAgent({
        id: params.agentId,
        name: body.name,
        description: body.description,
        files: body.files,
        config: body.config,
        workspaceDir: body.workspaceDir ?? path.join(workspaceRoot, params.agentId),
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
      return {
        ...agentJson(agent),
        files: { soul: agent.soul_md, agents: agent.agents_md, heartbeat: agent.heartbeat_md, tools: agent.tools_md },
      };
    },
  });
  route({
    method: 'GET',
    url: '/v1/agents',
    scope: 'read',
    summary: 'Every agent',
    response: z.object({ agents: z.array(S.AgentSchema) }),
    handler: async () => ({
      agents: (await db.selectFrom('agents').selectAll().orderBy('id').execute()).map(agentJson),
    }),
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
