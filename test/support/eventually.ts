/** Re-runs `probe` until it returns a value other than undefined (or stops throwing), or times out. */
export async function eventually<T>(probe: () => Promise<T | undefined> | T | undefined, options: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what ?? 'a condition'}${lastError ? `: ${String(lastError)}` : ''}`);
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 50));
  }
}
