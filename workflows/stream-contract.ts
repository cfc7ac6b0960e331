/**
 * Run streams, the contract: what an LLM step publishes while it runs and how a client folds it into
 * text. Pure (no I/O), imported by the activities that write streams, the client that tails them and
 * tests. The rows live in PostgreSQL (`stream_events`); see activities/streams/ and client/streams.ts.
 *
 * Guarantees:
 * - every event of a stream has a sequence number, 1-based and gap-free, so a client resumes after the
 *   last one it saw and misses nothing;
 * - each delta carries the Temporal activity attempt and the provider-fallback part that produced it;
 * - when an LLM call is retried (a new activity attempt, or the router falling back to another
 *   provider mid-stream) after some of its text was published, a `rewind` event supersedes that text:
 *   a client folding the stream with `applyStreamEvent` never shows the same answer twice.
 */

/** PostgreSQL NOTIFY channel: `{ streamId, seq }` after each committed batch (the rows are in `stream_events`). */
export const STREAM_NOTIFY_CHANNEL = 'agent_progress';

export type StreamEventKind = 'step-start' | 'delta' | 'rewind' | 'step-end' | 'event' | 'end';

export interface StreamEvent {
  streamId: string;
  seq: number;
  kind: StreamEventKind;
  /** The LLM step (`{sessionId}/{messageKey}`) for step-start, delta, rewind and step-end. */
  stepKey?: string;
  /** The activity attempt (1-based) that produced the event. */
  attempt: number;
  /** The provider-fallback part within the attempt (0-based). */
  part: number;
  /** Delta text. */
  text?: string;
  /**
   * step-start `{ model? }`; rewind `{ supersededChars, fromSeq, toSeq }` (the superseded deltas);
   * step-end `{ stopReason, toolCalls }`; event / end: free-form, `{ type, ... }`.
   */
  data?: Record<string, unknown>;
  createdAt: Date;
}

/** Which producer came later: attempts order first, then fallback parts within an attempt. */
export function compareProducer(a: { attempt: number; part: number }, b: { attempt: number; part: number }): number {
  return a.attempt - b.attempt || a.part - b.part;
}

export interface StreamStepText {
  stepKey: string;
  text: string;
  /** Deltas from producers before this one were superseded by a rewind. */
  floor: { attempt: number; part: number };
  /** How many rewinds this step saw. */
  rewinds: number;
  ended: boolean;
}

/** A stream folded into text, step by step, with superseded output removed. */
export interface StreamTranscript {
  steps: StreamStepText[];
  lastSeq: number;
  ended: boolean;
}

export function emptyTranscript(): StreamTranscript {
  return { steps: [], lastSeq: 0, ended: false };
}

/**
 * Folds one event into the transcript (mutates and returns it). A rewind discards the step's text so
 * far and raises its floor; a delta from below the floor (a stale attempt still writing) is ignored.
 * Events at or below `lastSeq` are ignored, so replaying overlapping pages is harmless.
 */
export function applyStreamEvent(transcript: StreamTranscript, event: StreamEvent): StreamTranscript {
  if (event.seq <= transcript.lastSeq) return transcript;
  transcript.lastSeq = event.seq;
  if (event.kind === 'end') {
    transcript.ended = true;
    return transcript;
  }
  if (!event.stepKey) return transcript;
  let step = transcript.steps.find((s) => s.stepKey === event.stepKey);
  if (!step) {
    step = { stepKey: event.stepKey, text: '', floor: { attempt: 0, part: 0 }, rewinds: 0, ended: false };
    transcript.steps.push(step);
  }
  if (event.kind === 'rewind') {
    if (compareProducer(event, step.floor) > 0) step.floor = { attempt: event.attempt, part: event.part };
    step.text = '';
    step.rewinds += 1;
  } else if (event.kind === 'delta' && compareProducer(event, step.floor) >= 0) {
    step.text += event.text ?? '';
  } else if (event.kind === 'step-end') {
    step.ended = true;
  }
  return transcript;
}

/** The transcript's text: each step's surviving text, in order, blank-line separated. */
export function transcriptText(transcript: StreamTranscript): string {
  return transcript.steps
    .map((s) => s.text)
    .filter(Boolean)
    .join('\n\n');
}
