import type { Migration } from 'kysely';
import * as foundation from './2026-11-30-001-foundation';
import * as memory from './2026-11-30-002-memory';
import * as summaries from './2026-11-30-003-summaries';
import * as governance from './2026-12-01-001-governance';
import * as api from './2026-12-01-004-api';
import * as taskGraph from './2026-12-01-005-task-graph';
import * as conversations from './2026-12-01-006-conversations';
import * as groupChat from './2026-12-01-007-group-chat';
import * as skills from './2026-12-01-009-skills';
import * as inboxSessions from './2026-12-01-021-inbox-sessions';
import * as approvalTrail from './2026-12-01-023-approval-trail';
import * as forkEval from './2026-12-01-025-fork-eval';
import * as mcpToolSnapshots from './2026-12-01-030-mcp-tool-snapshots';
import * as inboxSessionGroups from './2026-12-01-031-inbox-session-groups';
import * as toolResultImages from './2026-12-01-040-tool-result-images';
import * as chatIdempotency from './2026-12-01-041-chat-idempotency';
import * as agentActivityIndex from './2026-12-01-042-agent-activity-index';
import * as organisationWalls from './2026-12-04-001-organisation-walls';
import * as taskBudgetTree from './2026-12-05-001-task-budget-tree';

/**
 * Every migration, by name (date-prefixed so they sort in the order they run). A static list rather
 * than a folder scan, so the migrations load the same way under tsx, Jest and a bundled build.
 */
export const migrations: Record<string, Migration> = {
  '2026-11-30-001-foundation': foundation,
  '2026-11-30-002-memory': memory,
  '2026-11-30-003-summaries': summaries,
  '2026-12-01-001-governance': governance,
  '2026-12-01-004-api': api,
  '2026-12-01-005-task-graph': taskGraph,
  '2026-12-01-006-conversations': conversations,
  '2026-12-01-007-group-chat': groupChat,
  '2026-12-01-009-skills': skills,
  '2026-12-01-021-inbox-sessions': inboxSessions,
  '2026-12-01-023-approval-trail': approvalTrail,
  '2026-12-01-025-fork-eval': forkEval,
  '2026-12-01-030-mcp-tool-snapshots': mcpToolSnapshots,
  '2026-12-01-031-inbox-session-groups': inboxSessionGroups,
  '2026-12-01-040-tool-result-images': toolResultImages,
  '2026-12-01-041-chat-idempotency': chatIdempotency,
  '2026-12-01-042-agent-activity-index': agentActivityIndex,
  '2026-12-04-001-organisation-walls': organisationWalls,
  '2026-12-05-001-task-budget-tree': taskBudgetTree,
};
