import type { RecordedRequest } from '../fake-llm';

/** The system prompt a recorded Anthropic request carried, all segments joined. */
export function requestSystemText(r: RecordedRequest): string {
  return ((r.body.system ?? []) as Array<{ text: string }>).map((s) => s.text).join('\n');
}

/** The names of the tools a recorded request offered, sorted. */
export function requestToolNames(r: RecordedRequest): string[] {
  return ((r.body.tools ?? []) as Array<{ name: string }>).map((t) => t.name).sort();
}

/** The request's conversation as one string, for matching what a turn answered. */
export function requestMessagesText(r: RecordedRequest): string {
  return JSON.stringify(r.body.messages);
}
