import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';

/**
 * The remote URLs a workspace's repository may talk to. The URLs configured when governance first
 * looks at a workspace are recorded as `first-sight` (before that, the agent has had no unapproved way
 * to change them: `.git` is closed to file tools and `git remote`/`git config` writes need approval);
 * later ones only when a human approved a command that ran under them.
 */
export async function knownRemoteUrls(
  db: Kysely<Database>,
  workspaceDir: string,
): Promise<{ urls: Set<string>; seen: boolean }> {
  const rows = await db
    .selectFrom('workspace_remotes')
    .select('url')
    .where('workspace_dir', '=', workspaceDir)
    .execute();
  return { urls: new Set(rows.map((r) => r.url)), seen: rows.length > 0 };
}

export async function recordRemoteUrls(
  db: Kysely<Database>,
  workspaceDir: string,
  urls: readonly string[],
  source: 'first-sight' | 'approved',
  agentId: string,
): Promise<void> {
  if (urls.length === 0) return;
  await db
    .insertInto('workspace_remotes')
    .values(urls.map((url) => ({ workspace_dir: workspaceDir, url, source, agent_id: agentId })))
    .onConflict((oc) => oc.columns(['workspace_dir', 'url']).doNothing())
    .execute();
}
