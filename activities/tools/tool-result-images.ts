/**
 * Where tool-result images live in PostgreSQL. Every image is kept whole in `tool_result_images`, for the
 * operator. The session's messages carry an image only while it is among the session's newest
 * SESSION_IMAGES_KEPT, the ones a request can still show the model (`request-images.ts` picks the same
 * newest images). A session that takes a screenshot at every step therefore stays small to load on
 * every step, and the model still reads each retired image's description line in the result's text.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { REQUEST_IMAGES_MAX } from '../llm/request-images';
import type { ContentBlock, ToolResultImage } from '../llm/types';

/** Images a session's messages keep: as many as one request shows, so retiring the rest changes no request. */
export const SESSION_IMAGES_KEPT = REQUEST_IMAGES_MAX;

/** Records a call's images (idempotent: a retried call finds them recorded). */
export async function archiveToolImages(
  db: Kysely<Database>,
  sessionId: string,
  toolCallId: string,
  images: readonly ToolResultImage[],
): Promise<void> {
  if (images.length === 0) return;
  await db
    .insertInto('tool_result_images')
    .values(
      images.map((image, position) => ({
        session_id: sessionId,
        tool_call_id: toolCallId,
        position,
        media_type: image.mediaType,
        data: image.data,
        bytes: Buffer.byteLength(image.data, 'base64'),
      })),
    )
    .onConflict((oc) => oc.columns(['session_id', 'tool_call_id', 'position']).doNothing())
    .execute();
}

/**
 * Removes images from the session's older messages so that the newest SESSION_IMAGES_KEPT remain; returns
 * how many were removed. Within a result, the last images are the ones kept, as a request picks them.
 */
export async function retireOldToolImages(db: Kysely<Database>, sessionId: string): Promise<number> {
  const rows = await db
    .selectFrom('messages')
    .select(['id', 'content'])
    .where('session_id', '=', sessionId)
    .where(sql<boolean>`jsonb_path_exists(content, '$[*].images')`)
    .orderBy('id', 'desc')
    .execute();
  let kept = 0;
  let retired = 0;
  for (const row of rows) {
    const content = [...(row.content as ContentBlock[])];
    let changed = false;
    for (let b = content.length - 1; b >= 0; b--) {
      const block = content[b]!;
      if (block.type !== 'tool_result' || !block.images?.length) continue;
      const room = Math.max(0, SESSION_IMAGES_KEPT - kept);
      if (block.images.length <= room) {
        kept += block.images.length;
        continue;
      }
      const { images, ...rest } = block;
      content[b] = room > 0 ? { ...rest, images: images.slice(images.length - room) } : rest;
      kept += room;
      retired += images.length - room;
      changed = true;
    }
    if (changed)
      await db
        .updateTable('messages')
        .set({ content: JSON.stringify(content) })
        .where('id', '=', row.id)
        .execute();
  }
  return retired;
}
