import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '@temporalio/common';
import { DefaultLogger, Runtime } from '@temporalio/worker';

/** Where the Temporal SDK's logs of a test process go (expected failures log here, not to the console). */
export const TEST_LOG_DIR = path.resolve(__dirname, '..', '..', '.data', 'test-logs');

let installed = false;

/**
 * Installs the Temporal runtime for a test process once: SDK and core logs (warnings up, including the
 * retried activity failures tests provoke on purpose) are appended to `.data/test-logs/temporal-<pid>.log`
 * instead of the console, so `npm test` prints only the suite summary and the failing tests. A test that
 * inspects the SDK's logs passes its own logger instead.
 */
export function installQuietRuntime(logger?: Logger): void {
  if (installed) return;
  installed = true;
  mkdirSync(TEST_LOG_DIR, { recursive: true });
  const file = path.join(TEST_LOG_DIR, `temporal-${process.pid}.log`);
  try {
    Runtime.install({
      logger:
        logger ??
        new DefaultLogger('WARN', (entry) =>
          appendFileSync(
            file,
            `${new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString()} ${entry.level} ${entry.message} ${safeJson(entry.meta)}\n`,
          ),
        ),
      telemetryOptions: { logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} } },
    });
  } catch {
    // Another module of this process installed it first.
  }
}

function safeJson(value: unknown): string {
  try {
    return (
      JSON.stringify(value, (_key, v: unknown) =>
        v instanceof Error ? { name: v.name, message: v.message } : typeof v === 'bigint' ? String(v) : v,
      ) ?? ''
    );
  } catch {
    return String(value);
  }
}
