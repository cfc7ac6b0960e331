import type { Context } from '@temporalio/activity';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { taskWorkflowId } from '../../workflows/contract';
import type { ChatCallbacks } from '../llm/types';
import { appendStreamEvents, supersededOutput, type NewStreamEvent, type StreamOwner } from './store';
import { storableText } from '../security/binary';

/**
 * Streamed text is written at most this often per step: the first delta goes out almost at once (time
 * to first token is what a person notices), later ones are batched so a fast model costs ~20 short
 * transactions a second rather than one per token.
 */
export const STREAM_FLUSH_INTERVAL_MS = 50;
/**
 * The first text waits this long: far below what a reader notices, and a short reply that streams
 * whole within it (a tool-calling turn's one sentence from a fast model) needs no write before the
 * step's own closing statement, which would otherwise wait for it.
 */
export const STREAM_FIRST_DELTA_MS = 15;
/** One delta row holds at most this much text; a long burst is split over several rows. */
export const STREAM_DELTA_MAX_CHARS = 4_000;
/** A step's closing writes (last delta, step-end) are tried this many times before giving up. */
const STREAM_FINISH_TRIES = 3;
const STREAM_FINISH_RETRY_MS = 200;
/**
 * A step's `step-start` (and a retry's `rewind`) waits this long for the step's first write, so that it
 * shares that write's statement instead of costing one of its own: a follower cannot tell a quarter
 * second, and most steps write their first text or their reply within it. After it they are written alone.
 */
export const STEP_START_HOLD_MS = 250;

/**
 * The stream an LLM step writes to: a task's steps all go to `task-{taskId}` (one stream across its
 * rounds, so a client follows the whole task); any other step goes to the stream of the workflow
 * that ran it (a chat reply, a heartbeat), whose id is stable across continue-as-new and retries.
 */
export function stepStreamId(input: { taskId?: string; sessionId: string }, ctx: Context | undefined): string {
  if (input.taskId) return taskWorkflowId(input.taskId);
  return ctx?.info.workflowExecution?.workflowId ?? `session-${input.sessionId}`;
}

/**
 * Publishes one LLM step's output to its run stream (PostgreSQL rows + NOTIFY), tagged with the
 * activity attempt and the provider-fallback part that produced it. On construction it writes
 * `step-start`, preceded by a `rewind` when an earlier attempt of the same step already published
 * text (the worker died or the call failed mid-stream), with its first write or after
 * STEP_START_HOLD_MS, whichever comes first; when the router falls back to another provider
 * mid-call, the text of the failed part is rewound the same way. Writes are ordered; a failed write
 * keeps its text (and the rows it carried) for the next one. Never throws into the LLM call: the live stream must not fail it.
 */
export class StepStreamPublisher {
  private buffer = '';
  private part = 0;
  private lastFlushAt = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private chain: Promise<void>;
  /** `rewind`/`step-start` rows not written yet: they go out with the next write (see STEP_START_HOLD_MS). */
  private held: NewStreamEvent[] = [];
  private holdTimer: ReturnType<typeof setTimeout> | undefined;
  /** Writes that failed (after which the text was kept for the next write). */
  failures = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly owner: StreamOwner,
    readonly stepKey: string,
    readonly attempt: number,
    startData: Record<string, unknown> = {},
  ) {
    this.chain = this.rewindSuperseded(startData);
    this.holdTimer = setTimeout(() => {
      this.holdTimer = undefined;
      this.enqueue(() => this.append([]));
    }, STEP_START_HOLD_MS);
    this.holdTimer.unref?.();
  }

  /** For `router.chat`: text deltas, and a fallback to another provider starting a new part. */
  readonly callbacks: Pick<ChatCallbacks, 'onTextDelta' | 'onAttemptStart'> = {
    onTextDelta: (text) => this.push(text),
    onAttemptStart: ({ index }) => this.startPart(index),
  };

  push(text: string): void {
    if (!text) return;
    this.buffer += text;
    if (this.timer) return;
    const delay =
      this.lastFlushAt === 0
        ? STREAM_FIRST_DELTA_MS
        : Math.max(0, this.lastFlushAt + STREAM_FLUSH_INTERVAL_MS - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.enqueue(() => this.writeBuffer());
    }, delay);
  }

  /** Writes buffered text now (the call is over: nothing more can complete it); resolves when every earlier write has settled. */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.enqueue(async () => {
      await this.writeBuffer(true);
      if (this.held.length > 0) await this.append([]);
    });
    await this.chain;
  }

  /** The step completed: writes the remaining text and `step-end` (retried briefly; never throws). */
  async finish(data: Record<string, unknown>): Promise<void> {
    for (let i = 0; i < STREAM_FINISH_TRIES; i++) {
      await this.flush();
      if (!this.buffer) break;
      await new Promise((r) => setTimeout(r, STREAM_FINISH_RETRY_MS));
    }
    this.enqueue(() => this.append([{ kind: 'step-end', data }]));
    await this.chain;
  }

  /**
   * For a caller that writes the step's last stream rows inside its own statement (the step's reply
   * write: one round trip instead of two or three): waits for the writes already under way, then
   * returns the text still buffered as delta rows followed by `step-end`, with the owner to append them
   * as. After this the publisher writes nothing more; when the caller's statement fails, the step fails
   * and its retry rewinds whatever this attempt published.
   */
  async closing(data: Record<string, unknown>): Promise<{ owner: StreamOwner; events: NewStreamEvent[] }> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.chain;
    const held = this.takeHeld();
    const text = this.buffer;
    this.buffer = '';
    const deltas = text
      ? deltaPieces(text, STREAM_DELTA_MAX_CHARS).map((piece): NewStreamEvent => ({
          kind: 'delta',
          stepKey: this.stepKey,
          attempt: this.attempt,
          part: this.part,
          text: piece,
        }))
      : [];
    return { owner: this.owner, events: [...held, ...deltas, { kind: 'step-end', data }] };
  }

  /** The router is trying candidate `index` (0 = the first): earlier parts' text is superseded. */
  private startPart(index: number): void {
    if (index <= this.part) return;
    this.buffer = '';
    this.part = index;
    this.enqueue(() => this.rewindSuperseded());
  }

  private async rewindSuperseded(startData?: Record<string, unknown>): Promise<void> {
    const producer = { attempt: this.attempt, part: this.part };
    // Nothing precedes the first part of the first attempt: no output to supersede, no query.
    const first = producer.attempt <= 1 && producer.part === 0;
    const superseded = first
      ? undefined
      : await supersededOutput(this.db, this.owner.streamId, this.stepKey, producer).catch(() => undefined);
    const events: NewStreamEvent[] = [];
    if (superseded) {
      events.push({
        kind: 'rewind',
        stepKey: this.stepKey,
        ...producer,
        data: { supersededChars: superseded.chars, fromSeq: superseded.fromSeq, toSeq: superseded.toSeq },
      });
    }
    if (startData) {
      // Held for the step's first write (see STEP_START_HOLD_MS).
      this.held.push(...events, { kind: 'step-start', stepKey: this.stepKey, ...producer, data: startData });
      return;
    }
    await this.append(events);
  }

  private async writeBuffer(final = false): Promise<void> {
    // The first half of a surrogate pair waits for the delta that completes it (unless the call is over).
    const held = !final && isHighSurrogate(this.buffer.charCodeAt(this.buffer.length - 1)) ? 1 : 0;
    const text = this.buffer.slice(0, this.buffer.length - held);
    if (!text) return;
    const part = this.part;
    this.buffer = this.buffer.slice(text.length);
    this.lastFlushAt = Date.now();
    const events: NewStreamEvent[] = deltaPieces(text, STREAM_DELTA_MAX_CHARS).map((piece) => ({
      kind: 'delta',
      stepKey: this.stepKey,
      attempt: this.attempt,
      part,
      text: piece,
    }));
    try {
      await this.append(events);
    } catch (error) {
      // Keep the text for the next write, unless a fallback has superseded it meanwhile.
      if (part === this.part) this.buffer = text + this.buffer;
      throw error;
    }
  }

  /** Writes `events` after any held rows; a failed write keeps those rows for the next one. */
  private async append(events: NewStreamEvent[]): Promise<void> {
    const held = this.takeHeld();
    if (held.length + events.length === 0) return;
    try {
      await appendStreamEvents(this.db, this.owner, [...held, ...events]);
    } catch (error) {
      this.held = [...held, ...this.held];
      throw error;
    }
  }

  /** The held rows, now owned by the caller's write; the hold's timer is no longer needed. */
  private takeHeld(): NewStreamEvent[] {
    if (this.holdTimer) clearTimeout(this.holdTimer);
    this.holdTimer = undefined;
    const held = this.held;
    this.held = [];
    return held;
  }

  private enqueue(write: () => Promise<void>): void {
    this.chain = this.chain.then(write).catch(() => {
      this.failures += 1;
    });
  }
}

/** The publisher for one LLM step, from what the step knows: its input, message key and activity context. */
export function createStepStreamPublisher(
  db: Kysely<Database>,
  input: { agentId: string; taskId?: string; sessionId: string },
  messageKey: string,
  ctx: Context | undefined,
): StepStreamPublisher {
  const owner: StreamOwner = {
    streamId: stepStreamId(input, ctx),
    agentId: input.agentId,
    ...(input.taskId ? { taskId: input.taskId } : {}),
  };
  return new StepStreamPublisher(db, owner, `${input.sessionId}/${messageKey}`, ctx?.info.attempt ?? 1, {
    sessionId: input.sessionId,
  });
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/**
 * Streamed text cut into rows of at most `max` characters, never between the halves of a surrogate
 * pair, each made storable (a NUL or a lone surrogate would fail the write, and every later one with it).
 */
export function deltaPieces(text: string, max: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < text.length;) {
    let end = Math.min(i + max, text.length);
    if (end < text.length && end - i > 1 && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
    pieces.push(storableText(text.slice(i, end)));
    i = end;
  }
  return pieces;
}
