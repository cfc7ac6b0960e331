/**
 * Values read from the environment, checked where a process starts: a bad one stops the start with
 * one line naming the variable, its value and what is allowed, not a Node error from deep inside.
 */

/** Marks a ConfigurationError across module-registry boundaries (tsx, jest) where `instanceof` would not hold. */
const CONFIGURATION_ERROR: unique symbol = Symbol.for('durable-agents.ConfigurationError');

/** A variable whose value cannot be used; the process prints its message alone (no stack) and exits 1. */
export class ConfigurationError extends Error {
  override readonly name = 'ConfigurationError';
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

/** A TCP port to listen on (0 lets the system pick one), or undefined when the variable is unset or empty. */
export function portFromEnv(name: string, env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || value > MAX_PORT)
    throw new ConfigurationError(name, raw, `a port number from 0 to ${MAX_PORT}`);
  return value;
}
