import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';
import pino from 'pino';
import { redactSecrets, secretValues } from '../activities/security/secrets';
import { choiceFromEnv } from '../activities/env-values';

/** pino's levels, the values `LOG_LEVEL` takes. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** `LOG_LEVEL` (default `info`); another word is refused by name (`loadConfig` checks it at start). */
export function logLevelFromEnv(env: NodeJS.ProcessEnv = process.env): (typeof LOG_LEVELS)[number] {
  return choiceFromEnv('LOG_LEVEL', LOG_LEVELS, env) ?? 'info';
}

/** The level to log at even when LOG_LEVEL is bad: the line that says so must still be written. */
function usableLogLevel(): string {
  try {
    return logLevelFromEnv();
  } catch {
    return 'info';
  }
}

/**
 * Structured JSON logs (pino) for the worker and everything Temporal's SDK logs: workflow `log` calls
 * (replay-aware, routed through the worker), activity context loggers and the core runtime.
 * One line per event with `workflowId`, `runId`, `activityType`… as fields, ready for a log pipeline.
 */
export function createLogger(level = usableLogLevel(), destination?: pino.DestinationStream): pino.Logger {
  const secrets = secretValues();
  const options: pino.LoggerOptions = {
    level,
    base: { service: 'durable-agents-worker' },
    // Secrets never reach the logs: every argument of every log call is redacted first.
    hooks: {
      logMethod(args, method) {
        method.apply(this, args.map((arg) => redactLogArgument(arg, secrets)) as Parameters<pino.LogFn>);
      },
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

/** A log argument with the worker's secrets cut out (strings, errors, and JSON-able objects). */
export function redactLogArgument(arg: unknown, secrets: readonly string[]): unknown {
  if (typeof arg === 'string') return redactSecrets(arg, secrets).text;
  if (arg instanceof Error) {
    const message = redactSecrets(arg.message, secrets);
    const stack = redactSecrets(arg.stack ?? '', secrets);
    if (message.count === 0 && stack.count === 0) return arg;
    return { type: arg.name, message: message.text, stack: stack.text };
  }
  if (arg && typeof arg === 'object') {
    let json: string | undefined;
    try {
      json = JSON.stringify(arg, (_key, value: unknown) =>
        value instanceof Error ? { type: value.name, message: value.message, stack: value.stack } : value,
      );
    } catch {
      return arg;
    }
    if (json === undefined) return arg;
    const redacted = redactSecrets(json, secrets);
    return redacted.count === 0 ? arg : (JSON.parse(redacted.text) as unknown);
  }
  return arg;
}

const PINO_LEVEL: Record<LogLevel, pino.Level> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/** Adapts a pino logger to the Temporal SDK's `Logger` interface (for `Runtime.install`). */
export class TemporalPinoLogger implements Logger {
  constructor(private readonly logger: pino.Logger) {}

  log(level: LogLevel, message: string, meta?: LogMetadata): void {
    this.logger[PINO_LEVEL[level]](meta ?? {}, message);
  }
  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }
  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }
  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }
  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }
  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}
