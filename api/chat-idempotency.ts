/**
 * The chat route's `Idempotency-Key` header: a client that lost a POST's answer (a dropped connection,
 * an API process killed before the `item` event) sends it again with the same key and gets the same
 * item and its answer, not a second turn. The key is scoped by the caller, so two callers cannot
 * collide or read each other's items, and it reaches the agent as the delivery's `idempotencyKey`.
 */
import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { findIdempotentItem, sameDelivery } from '../activities/mailbox/idempotency';
import type { Database } from '../schema/database';
import type { DeliverResult } from '../workflows/agent-contract';
import { ApiError } from './errors';
import type { ApiPrincipal } from './tokens';

/** As the IETF httpapi draft and the payment APIs do: long enough for any UUID or hash, short enough to index. */
export const IDEMPOTENCY_KEY_MAX_CHARS = 255;
/** Visible ASCII only: a header value that survives every proxy unchanged. */
const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]+$/;

/**
 * The delivery's key for this request: the caller's name and the header, hashed so that any name and
 * key fit the index. Undefined without the header; 400 for a malformed one.
 */
export function scopedIdempotencyKey(request: FastifyRequest, principal: ApiPrincipal): string | undefined {
  const header = request.headers['idempotency-key'];
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!value || value.length > IDEMPOTENCY_KEY_MAX_CHARS || !IDEMPOTENCY_KEY_PATTERN.test(value))
    throw new ApiError(
      400,
      'invalid_request',
      `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX_CHARS} visible ASCII characters (a UUID, say); got ${JSON.stringify(value.slice(0, 40))}`,
    );
  return `http:${createHash('sha256')
    .update(JSON.stringify([principal.name, value]))
    .digest('hex')}`;
}

/**
 * The item an earlier request with this key stored, as a replayed delivery; undefined when there is
 * none. 422 when that request was another message: answering it with the old item would lose this one.
 */
export async function replayedChat(
  db: Kysely<Database>,
  agentId: string,
  key: string,
  request: { kind: string; from: { type: string; id: string }; channel: string; text: string },
): Promise<DeliverResult | undefined> {
  const first = await findIdempotentItem(db, agentId, key);
  if (!first) return undefined;
  if (!sameDelivery(first, request))
    throw new ApiError(
      422,
      'idempotency_key_reused',
      `this Idempotency-Key was already used for another message to agent ${agentId} (item ${first.itemId}): use a new key for a new message`,
    );
  return {
    itemId: first.itemId,
    status: first.mergedInto ? 'merged' : 'queued',
    ...(first.mergedInto ? { mergedInto: first.mergedInto } : {}),
    channel: first.channel,
    replayed: true,
  };
}
