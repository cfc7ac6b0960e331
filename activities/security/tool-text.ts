import { escapeNulDeep, escapeNul } from './binary';
import { redactSecrets, secretValues } from './secrets';

export interface SafeToolText {
  text: string;
  /** How many secrets were cut out. */
  redactions: number;
}

/**
 * The one gate every tool result passes before it is stored, shown to a model, logged or put in
 * history: NUL bytes escaped (PostgreSQL text cannot hold them) and secrets redacted, with a visible
 * note saying that a redaction happened.
 */
export function safeToolText(
  text: string,
  values: readonly string[] = secretValues(),
  alreadyRedacted = 0,
): SafeToolText {
  const redaction = redactSecrets(escapeNul(text), values);
  const count = redaction.count + alreadyRedacted;
  if (count === 0) return { text: redaction.text, redactions: 0 };
  return {
    // In front, so every preview and truncated view shows it.
    text: `[${count} secret value(s) were redacted from this result.]\n${redaction.text}`,
    redactions: count,
  };
}

/** Model-supplied arguments as JSON that PostgreSQL accepts (no NUL), with secrets redacted. */
export function safeArgumentsJson(args: unknown, values: readonly string[] = secretValues()): string {
  return redactSecrets(JSON.stringify(escapeNulDeep(args ?? null)), values).text;
}

/** A short string (approval summary, reason) with NUL escaped and secrets redacted. */
export function safeLine(text: string, values: readonly string[] = secretValues()): string {
  return redactSecrets(escapeNul(text), values).text;
}
