/**
 * Values read from the environment, checked where a process starts: a bad one stops the start with
 * one line naming the variable, its value and what is allowed, not a Node error from deep inside.
 * Every reader returns undefined for a variable that is unset or empty, so callers keep their defaults.
 */
import { isIP } from 'node:net';

/** Marks a ConfigurationError across module-registry boundaries (tsx, jest) where `instanceof` would not hold. */
const CONFIGURATION_ERROR: unique symbol = Symbol.for('durable-agents.ConfigurationError');

/**
 * A variable whose value cannot be used; the process prints its message alone (no stack) and exits 1.
 * `value` is the value as the message shows it: a caller passes a masked one for a secret.
 */
export class ConfigurationError extends Error {
  override readonly name: string = 'ConfigurationError';
  readonly [CONFIGURATION_ERROR] = true;
  constructor(
    readonly variable: string,
    readonly value: string,
    allowed: string,
  ) {
    super(`${variable}=${JSON.stringify(value)} is not allowed: ${allowed}`);
  }
}

export function isConfigurationError(error: unknown): error is ConfigurationError {
  return Boolean(error && typeof error === 'object' && CONFIGURATION_ERROR in error);
}

/** The highest TCP port number. */
export const MAX_PORT = 65_535;

/** The raw value, or undefined when the variable is unset or only blanks. */
function raw(name: string, env: NodeJS.ProcessEnv): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value;
}

/** A TCP port to listen on (0 lets the system pick one). */
export function portFromEnv(name: string, env: NodeJS.ProcessEnv = process.env): number | undefined {
  const value = raw(name, env);
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value.trim()) || Number(value) > MAX_PORT)
    throw new ConfigurationError(name, value, `a port number from 0 to ${MAX_PORT}`);
  return Number(value);
}

/** A whole number of at least `min` (milliseconds, bytes, a count). */
export function wholeNumberFromEnv(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
  { min = 0, unit = '' }: { min?: number; unit?: string } = {},
): number | undefined {
  const value = raw(name, env);
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value.trim()) || Number(value) < min || !Number.isSafeInteger(Number(value)))
    throw new ConfigurationError(
      name,
      value,
      `a whole number${unit ? ` of ${unit}` : ''}${min > 0 ? `, at least ${min}` : ''}`,
    );
  return Number(value);
}

/** One of a fixed list of words (compared without case), as the list spells it. */
export function choiceFromEnv<T extends string>(
  name: string,
  choices: readonly T[],
  env: NodeJS.ProcessEnv = process.env,
): T | undefined {
  const value = raw(name, env);
  if (value === undefined) return undefined;
  const chosen = choices.find((choice) => choice.toLowerCase() === value.trim().toLowerCase());
  if (chosen === undefined) {
    const quoted = choices.map((c) => JSON.stringify(c));
    const listed = quoted.length <= 2 ? quoted.join(' or ') : `one of ${quoted.join(', ')}`;
    throw new ConfigurationError(name, value, `${listed}, or unset`);
  }
  return chosen;
}

/**
 * A switch spelled with the two words its documentation gives (`1`/`0`, `true`/`false`, `on`/`off`).
 * A third word is refused rather than read as off: `DURABLE_AGENTS_METRICS=true` must not mean no metrics.
 */
export function switchFromEnv(
  name: string,
  [on, off]: readonly [on: string, off: string],
  env: NodeJS.ProcessEnv = process.env,
): boolean | undefined {
  const word = choiceFromEnv(name, [on, off], env);
  return word === undefined ? undefined : word === on;
}

/** An absolute URL with one of `protocols` (default http: and https:), trimmed. */
export function urlFromEnv(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
  protocols: readonly string[] = ['http:', 'https:'],
): string | undefined {
  const value = raw(name, env);
  if (value === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value.trim());
  } catch {
    url = undefined;
  }
  if (!url || !protocols.includes(url.protocol) || (url.protocol.startsWith('http') && !url.hostname))
    throw new ConfigurationError(
      name,
      value,
      `an absolute ${protocols.map((p) => `${p}//`).join(' or ')} URL, such as ${protocols[0]}//example.com`,
    );
  return value.trim();
}

/** A host name: dot-separated labels of letters, digits and '-' (RFC 1123). */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i;

/** The address a server listens on: an IP address or a host name. */
export function hostFromEnv(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const value = raw(name, env);
  if (value === undefined) return undefined;
  const host = value.trim();
  if (isIP(host) === 0 && !HOST_NAME.test(host))
    throw new ConfigurationError(
      name,
      value,
      'an IP address or a host name, such as 127.0.0.1, 0.0.0.0, :: or localhost',
    );
  return host;
}

/**
 * `host:port`, `[ipv6]:port`, or with `portOptional` a host alone (as Temporal's SDK takes an address).
 * No scheme: `http://…` is refused here rather than by a TypeError deep in a client.
 */
export function hostPortFromEnv(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
  { portOptional = false, example = '127.0.0.1:7233' }: { portOptional?: boolean; example?: string } = {},
): string | undefined {
  const value = raw(name, env);
  if (value === undefined) return undefined;
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:/@[\]]+)(?::(\d+))?$/.exec(value.trim());
  const host = match?.[1]?.replace(/^\[|\]$/g, '');
  const hostOk = host !== undefined && (isIP(host) !== 0 || HOST_NAME.test(host));
  const port = match?.[2];
  if (!match || !hostOk || (port === undefined && !portOptional) || (port !== undefined && Number(port) > MAX_PORT))
    throw new ConfigurationError(
      name,
      value,
      `${portOptional ? 'host or host:port' : 'host:port'} without a scheme, such as ${example}, port 0 to ${MAX_PORT}`,
    );
  return value.trim();
}

/**
 * What a failed `listen` means for the operator: the port variable when the port is taken or
 * forbidden, the host variable when the address is not this machine's. Other errors pass unchanged.
 */
export function listenError(
  error: unknown,
  port: readonly [variable: string, value: number | string],
  host: readonly [variable: string, value: string],
): unknown {
  const code = (error as { code?: unknown } | undefined)?.code;
  const detail = error instanceof Error ? error.message : String(error);
  if (code === 'EADDRINUSE' || code === 'EACCES')
    return new ConfigurationError(port[0], String(port[1]), `a port free for this process on ${host[1]} (${detail})`);
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAFNOSUPPORT')
    return new ConfigurationError(host[0], host[1], `an address of this machine (${detail})`);
  return error;
}
