/**
 * Tool call ids unique within a session. The exactly-once ledger keys a call by (session, tool call
 * id), so a provider that repeats ids across turns (some OpenAI-compatible servers send `call_0` on
 * every reply, or no id at all) would make a new call look like one already run: its old result would
 * come back and the new call would never run. A fresh reply's repeated or missing ids are renamed
 * before it is stored; the stored reply and the tool results both carry the new id, so every provider
 * sees a consistent conversation.
 */
import type { ChatMessage, ContentBlock } from './types';

export function withSessionUniqueToolIds<B extends ContentBlock>(
  content: readonly B[],
  earlier: readonly ChatMessage[],
  stepKey: string,
): B[] {
  const used = new Set<string>();
  for (const message of earlier)
    for (const block of message.content ?? []) if (block.type === 'tool_use') used.add(block.id);
  return content.map((block, index) => {
    if (block.type !== 'tool_use') return block;
    let id = block.id;
    if (!id || used.has(id)) {
      // The step key (attempt and turn) and the block's position name it; a counter settles any clash.
      const base = `${id || 'call'}_${stepKey}_${index}`;
      id = base;
      for (let n = 2; used.has(id); n++) id = `${base}_${n}`;
    }
    used.add(id);
    return id === block.id ? block : { ...block, id };
  });
}
