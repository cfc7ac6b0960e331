import { isCancellation, log, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ExecuteToolResult } from '../activities/tools/execute';
import type { StepWithToolsResult } from '../activities/step/with-tools';
import { LAST_CALLS_LINE_LOCAL } from './activity-options';
import {
  callsText,
  DETAILS_RECENT_CALLS,
  llmCallLine,
  stepSummary,
  toolCallLine,
  type CallLine,
} from './rules/call-lines';

const line = proxyLocalActivities<Activities>(LAST_CALLS_LINE_LOCAL);

/**
 * The calls a round made, for people reading the Temporal UI (rules/call-lines.ts). A summary is fixed
 * when its activity is scheduled, and a step's calls are known only once it is done, so each step's
 * summary names the calls of the step before it: the LLM call (model, tokens, cost, stop reason) and
 * every tool call (the call, its outcome, the ledger's state). This costs no command: the step is
 * scheduled anyway. The last step's calls have no step after them; with `lastLine` they get a line of
 * their own when the run ends (`showLast`), one local activity per run. The newest calls also feed the
 * round's current details.
 *
 * A line per call, each a local activity of its own, was measured first: two more local activities per
 * iteration cost 3–4 ms of it (30 %) in `npm run bench:loop`, so the calls of a step share a line.
 */
export class RoundCalls {
  private readonly recentLines: CallLine[] = [];
  /** Calls made since the last step was scheduled: the next step's summary (or the last line) names them. */
  private unshown: CallLine[] = [];

  constructor(private readonly lastLine: boolean) {}

  /** The newest calls, oldest first (at most DETAILS_RECENT_CALLS). */
  get recent(): readonly CallLine[] {
    return this.recentLines;
  }

  /** The summary of the next step: its label, then the calls of the step before it. */
  stepSummary(label: string): string {
    return stepSummary(label, this.unshown);
  }

  /** A step is done: the calls its summary named are shown; its own LLM call and tool calls are next. */
  addStep(turn: number, step: StepWithToolsResult): void {
    this.unshown = [];
    this.add([llmCallLine(turn, step), ...step.toolResults.map((r) => toolCallLine(turn, r.summary, r.result))]);
  }

  /** A call the workflow ran itself (after an approval, or a sub-agent's recorded result). */
  addTool(turn: number, summary: string, result: ExecuteToolResult): void {
    if (result.kind === 'done') this.add([toolCallLine(turn, summary, result)]);
  }

  /**
   * Before the run ends (completed, or continued as new): the calls no step's summary named get a line
   * of their own, a local activity that does nothing else.
   */
  async showLast(): Promise<void> {
    if (!this.lastLine || this.unshown.length === 0) return;
    const summary = callsText(this.unshown);
    this.unshown = [];
    try {
      await line.showLastStepCalls.executeWithOptions({ ...LAST_CALLS_LINE_LOCAL, summary }, []);
    } catch (error) {
      if (isCancellation(error)) throw error;
      log.warn('the last calls line was not written', { error: String(error) }); // a missing line, nothing more
    }
  }

  private add(lines: CallLine[]): void {
    this.unshown.push(...lines);
    this.recentLines.push(...lines);
    this.recentLines.splice(0, Math.max(0, this.recentLines.length - DETAILS_RECENT_CALLS));
  }
}
