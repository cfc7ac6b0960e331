import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';
import pino from 'pino';

/**
 * Structured JSON logs (pino) for the worker and everything Temporal's SDK logs: workflow `log` calls
 * (replay-aware, routed through the worker), activity context loggers and the core runtime.
 * One line per event with `workflowId`, `runId`, `activityType`… as fields, ready for a log pipeline.
 */
export function createLogger(level = process.env.LOG_LEVEL?.toLowerCase() ?? 'info'): pino.Logger {
  return pino({ level, base: { service: 'durable-agents-worker' } });
}

const PINO_LEVEL: Record<LogLevel, pino.Level> = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' };

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
