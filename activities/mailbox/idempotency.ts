/**
 * Idempotent deliveries: a delivery may carry a client's key (the HTTP API's `Idempotency-Key` header,
 * scoped by the caller). The first delivery with a key stores its item with it; a retry with the same
 * key to the same agent finds that item and stores nothing, so the agent never answers one message
 * twice. The unique index of migration 041 settles two attempts that race each other.
 */
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';

/** What a retried delivery answers: the item the first attempt stored. */
export interface IdempotentItem {
  itemId: string;
  kind: string;
  from: { type: string; id: string };
  channel: string;
  mergedInto?: string;
  /** The sha256 of the text the first attempt delivered. */
  textSha256: string;
}

export function textSha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The item an earlier delivery with `key` stored for `agentId`, if any. */
export async function findIdempotentItem(
  db: Kysely<Database>,
  agentId: string,
  key: string,
): Promise<IdempotentItem | undefined> {
  const row = await db
    .selectFrom('mailbox_items')
    .select(['id', 'kind', 'from_type', 'from_id', 'channel', 'merged_into', 'idempotency_text_sha256'])
    .where('agent_id', '=', agentId)
    .where('idempotency_key', '=', key)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    itemId: row.id,
    kind: row.kind,
    from: { type: row.from_type, id: row.from_id },
    channel: row.channel,
    ...(row.merged_into ? { mergedInto: row.merged_into } : {}),
    textSha256: row.idempotency_text_sha256 ?? '',
  };
}

/**
 * Whether a retried request is the same message as the one first delivered with its key: same kind,
 * sender, channel (as defaulted) and text. A key reused for another message must be refused, not answered with the
 * first one's item, or the new message would be silently lost.
 */
export function sameDelivery(
  first: IdempotentItem,
  retry: { kind: string; from: { type: string; id: string }; channel: string; text: string },
): boolean {
  return (
    first.kind === retry.kind &&
    first.from.type === retry.from.type &&
    first.from.id === retry.from.id &&
    first.channel === retry.channel &&
    first.textSha256 === textSha256(retry.text)
  );
}
