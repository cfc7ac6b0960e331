/**
 * Secrets never leave the worker: the values of its secret environment variables (provider keys, the
 * password in `DATABASE_URL` …) and anything the credential scanner recognises are cut out of every
 * tool result before it is stored, shown to a model, logged or put in Temporal history.
 *
 * ```ts
 * redactSecrets('key=sk-ant-abc…', ['sk-ant-abc…']) // { text: 'key=[REDACTED secret]', count: 1 }
 * ```
 *
 * Limits: only literal occurrences are found. An encoding the agent applies itself (base64, hex,
 * reversing) is not; that is why the paths that hold secrets (`/proc/<pid>/environ`, files outside the
 * workspace) are closed as well, and redaction is the second line.
 */

/**
 * Credentials that must never be written into a prompt file or leave through a tool result. The
 * prefixes need a token-like tail so words like "task-list" do not match.
 */
export const SECRET_PATTERNS: ReadonlyArray<{ name: string; pattern: RegExp }> = [
  { name: 'OpenAI/Anthropic-style API key (sk-…)', pattern: /\bsk-[A-Za-z0-9_-]{16,}/ },
  { name: 'Slack bot token (xoxb-…)', pattern: /\bxoxb-[A-Za-z0-9-]{10,}/ },
  { name: 'AWS access key id (AKIA…)', pattern: /\bAKIA[0-9A-Z]{16}\b/ },
  { name: 'GitHub token (ghp_…)', pattern: /\bghp_[A-Za-z0-9]{20,}/ },
  { name: 'GitLab token (glpat-…)', pattern: /\bglpat-[A-Za-z0-9_-]{20,}/ },
];

/** Environment variable names whose values are secrets (provider keys, tokens, passwords). */
const SECRET_ENV_NAME = /(api_?key|token|secret|passw(or)?d|passphrase|credential|private_?key|access_?key|auth)/i;

/**
 * Values shorter than this are not redacted: a 3-character "secret" would shred ordinary output, and
 * a value that short is no credential worth the name.
 */
export const MIN_SECRET_VALUE_CHARS = 6;

/** What replaces a secret in a tool result. */
export const REDACTION_MARKER = '[REDACTED secret]';

/**
 * Values the worker resolved for a tool server's `${NAME}` references (MCP headers and environments):
 * secrets whatever their variable is called, redacted like the worker's own from then on.
 */
const registeredSecrets = new Set<string>();

export function registerSecretValues(values: readonly string[]): void {
  for (const value of values) registeredSecrets.add(value);
}

/** The secret values found in an environment, longest first (so a value containing another goes first). */
export function secretValues(env: NodeJS.ProcessEnv = process.env): string[] {
  const values = new Set<string>();
  const add = (value: string | undefined) => {
    if (value !== undefined && value.length >= MIN_SECRET_VALUE_CHARS) values.add(value);
  };
  if (env === process.env) for (const value of registeredSecrets) add(value);
  for (const [name, value] of Object.entries(env)) {
    if (!value) continue;
    if (SECRET_ENV_NAME.test(name)) add(value);
    // Any URL-valued variable (DATABASE_URL, a proxy …) may carry a password.
    if (/^[a-z][a-z0-9+.-]*:\/\/[^/]*@/i.test(value)) {
      try {
        const url = new URL(value);
        if (url.password) {
          add(url.password);
          add(decodeURIComponent(url.password));
        }
      } catch {
        // Not a URL after all.
      }
    }
  }
  return [...values].sort((a, b) => b.length - a.length);
}

export interface Redaction {
  text: string;
  /** How many secrets were cut out. */
  count: number;
}

/** Cuts every known secret value and every scanner match out of `text`. */
export function redactSecrets(text: string, values: readonly string[] = secretValues()): Redaction {
  let count = 0;
  let out = text;
  for (const value of values) {
    if (!out.includes(value)) continue;
    const parts = out.split(value);
    count += parts.length - 1;
    out = parts.join(REDACTION_MARKER);
  }
  for (const { name, pattern } of SECRET_PATTERNS) {
    out = out.replace(new RegExp(pattern.source, 'g'), () => {
      count += 1;
      return `[REDACTED ${name}]`;
    });
  }
  return { text: out, count };
}

/** The name of the first credential pattern `body` contains (for refusing to write it somewhere). */
export function findSecret(body: string): string | undefined {
  return SECRET_PATTERNS.find((p) => p.pattern.test(body))?.name;
}
