/**
 * What the fake provider answers, the same for every system the bench runs: for each task, n − 1 turns
 * that each call `file_write` once (a real file write in the agent's workspace), then one turn calling
 * `task_submit_review`. Requests are routed to their task by the task prompt's marker, which both the
 * durable loop and the in-process loop send. Only requests the fake actually answered are counted.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import { anthropicStreamFrames } from '../../test/fake-llm/anthropic-protocol';
import type { FakeLlmServer, RecordedRequest, ScriptedMessage, ScriptedResponse } from '../../test/fake-llm';

const TASK_ID_PATTERN = /\[TASK EXECUTION — Task ID: ([^\]\s]+)\]/;

/** Usage the fake reports on every call (the figures do not depend on it). */
const FAKE_USAGE = { inputTokens: 1_200, outputTokens: 40, cacheReadTokens: 9_000, cacheWriteTokens: 0 };

export interface TaskScript {
  calls: number;
  /** How long each answer takes to stream, spread over its frames. */
  answerMs: number;
}

export function writeTurn(index: number): ScriptedMessage {
  return {
    kind: 'message',
    content: [
      { type: 'text', text: `Writing part ${index} of the report.` },
      {
        type: 'tool_use',
        name: 'file_write',
        input: {
          path: `report/part-${index}.md`,
          content: `# Part ${index}\n\nFindings for part ${index}: all checks passed.\n`,
        },
      },
    ],
    stopReason: 'tool_use',
    usage: FAKE_USAGE,
  };
}

export function submitTurn(): ScriptedMessage {
  return {
    kind: 'message',
    content: [
      { type: 'text', text: 'All parts are written; submitting.' },
      { type: 'tool_use', name: 'task_submit_review', input: { summary: 'Wrote the report in report/part-*.md.' } },
    ],
    stopReason: 'tool_use',
    usage: FAKE_USAGE,
  };
}

/** Delay between stream frames so that a whole answer takes about `answerMs`. */
function chunkDelay(message: ScriptedMessage, answerMs: number): number {
  if (answerMs <= 0) return 0;
  let n = 0;
  const frames = anthropicStreamFrames(message, { model: 'm', nextId: (p) => `${p}_${++n}` });
  return answerMs / Math.max(1, frames.length - 1);
}

/** Routes the fake's requests to per-task scripts and counts the answers it served. */
export class ScriptedTasks {
  private readonly scripts = new Map<string, TaskScript & { served: number }>();
  /** Other requests (summariser, reflection, heartbeat) answered with a short text. */
  otherServed = 0;
  /** Answers requests that belong to no task (the heartbeat simulation); default: a short text. */
  other: ((request: RecordedRequest) => ScriptedResponse) | undefined;

  constructor(private readonly fake: FakeLlmServer) {
    fake.setResponder((request) => this.respond(request));
  }

  add(taskId: string, script: TaskScript): void {
    this.scripts.set(taskId, { ...script, served: 0 });
  }

  served(taskIds: readonly string[]): number {
    return taskIds.reduce((sum, id) => sum + (this.scripts.get(id)?.served ?? 0), 0);
  }

  /** Whether every one of these tasks has been served its last scripted call. */
  lastCallsServed(taskIds: readonly string[]): boolean {
    return taskIds.every((id) => {
      const script = this.scripts.get(id);
      return script !== undefined && script.served >= script.calls;
    });
  }

  /** Every request the fake received, in order. */
  recorded(): RecordedRequest[] {
    return this.fake.requests;
  }

  /** The recorded request bodies of one task's tool-offering calls, in order. */
  requestsOf(taskId: string): RecordedRequest[] {
    return this.fake.requests.filter((r) => offersTools(r) && taskIdOf(r) === taskId);
  }

  private respond(request: RecordedRequest): ScriptedResponse {
    const taskId = offersTools(request) ? taskIdOf(request) : undefined;
    const script = taskId ? this.scripts.get(taskId) : undefined;
    if (!script) {
      this.otherServed += 1;
      if (this.other) return this.other(request);
      return {
        kind: 'message',
        content: [{ type: 'text', text: 'Nothing to report.' }],
        stopReason: 'end_turn',
        usage: FAKE_USAGE,
      };
    }
    const index = script.served;
    script.served += 1;
    const message = index < script.calls - 1 ? writeTurn(index) : submitTurn();
    return { ...message, chunkDelayMs: chunkDelay(message, script.answerMs) };
  }
}

export const offersTools = (r: RecordedRequest): boolean =>
  Array.isArray(r.body.tools) && (r.body.tools as unknown[]).length > 0;

function taskIdOf(r: RecordedRequest): string | undefined {
  const messages = r.body.messages as Array<{ content: unknown }> | undefined;
  const first = messages?.[0];
  return first ? TASK_ID_PATTERN.exec(JSON.stringify(first.content))?.[1] : undefined;
}

/** The bench's task row, already `in_progress` (the bench drives the loop itself, not a task workflow). */
export async function insertBenchTask(
  db: Kysely<Database>,
  task: { id: string; agentId: string; description?: string },
): Promise<void> {
  await db
    .insertInto('tasks')
    .values({
      id: task.id,
      agent_id: task.agentId,
      title: 'Write the report',
      description: task.description ?? 'Write the report in parts, then submit it for review.',
      state: 'in_progress',
      priority: 'medium',
    })
    .execute();
}
