/**
 * The tool-loop detector for conversation scenarios: it watches the last tool calls and
 * warns, then stops, a model that repeats itself. Pure and deterministic (workflow code).
 */

/** Seed: calls remembered. */
export const LOOP_HISTORY = 30;
/** Seed: repeats of one call (same tool, same arguments) that warn, and that stop the loop. */
export const LOOP_REPEAT_WARNING = 5;
export const LOOP_REPEAT_CRITICAL = 10;
/** Seed: A↔B alternation cycles that warn (ceil(5/2)) and stop (ceil(10/2)). */
export const LOOP_PING_PONG_WARNING = 3;
export const LOOP_PING_PONG_CRITICAL = 5;
/** Seed: the same tool called back to back, whatever the arguments. */
export const LOOP_BURST_WARNING = 7;
export const LOOP_BURST_CRITICAL = 12;

export interface ToolCallSignature {
  tool: string;
  /** The call's arguments in a stable form (here the tool's one-line summary). */
  args: string;
  /** A digest of the call's result, when known: identical results mean no progress. */
  result?: string;
}

export type LoopVerdict =
  | { level: 'ok' }
  | {
      level: 'warning' | 'critical';
      detector: 'genericRepeat' | 'noProgress' | 'pingPong' | 'sameToolBurst';
      count: number;
    };

/** Records a call into `history` (mutated, bounded) and judges the history. */
export function recordToolCall(history: ToolCallSignature[], call: ToolCallSignature): LoopVerdict {
  history.push(call);
  if (history.length > LOOP_HISTORY) history.splice(0, history.length - LOOP_HISTORY);
  const key = (c: ToolCallSignature) => `${c.tool}\u0000${c.args}`;
  const verdicts: LoopVerdict[] = [];

  const repeats = history.filter((c) => key(c) === key(call)).length;
  verdicts.push(level('genericRepeat', repeats, LOOP_REPEAT_WARNING, LOOP_REPEAT_CRITICAL));
  if (call.result !== undefined) {
    const same = history.filter((c) => key(c) === key(call) && c.result === call.result).length;
    verdicts.push(level('noProgress', same, LOOP_REPEAT_WARNING, LOOP_REPEAT_CRITICAL));
  }

  let burst = 0;
  for (let i = history.length - 1; i >= 0 && history[i]!.tool === call.tool; i--) burst++;
  verdicts.push(level('sameToolBurst', burst, LOOP_BURST_WARNING, LOOP_BURST_CRITICAL));

  // A, B, A, B …: count full cycles at the end of the history.
  let cycles = 0;
  const n = history.length;
  if (n >= 2 && key(history[n - 1]!) !== key(history[n - 2]!)) {
    const a = key(history[n - 1]!);
    const b = key(history[n - 2]!);
    for (let i = n - 1; i >= 1; i -= 2) {
      if (key(history[i]!) === a && key(history[i - 1]!) === b) cycles++;
      else break;
    }
  }
  verdicts.push(level('pingPong', cycles, LOOP_PING_PONG_WARNING, LOOP_PING_PONG_CRITICAL));

  return verdicts.find((v) => v.level === 'critical') ?? verdicts.find((v) => v.level === 'warning') ?? { level: 'ok' };
}

function level(
  detector: 'genericRepeat' | 'noProgress' | 'pingPong' | 'sameToolBurst',
  count: number,
  warning: number,
  critical: number,
): LoopVerdict {
  if (count >= critical) return { level: 'critical', detector, count };
  if (count >= warning) return { level: 'warning', detector, count };
  return { level: 'ok' };
}
