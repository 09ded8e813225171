/** Polling for a state a controller reaches by itself, with what was seen when it never came. */

export interface UntilOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** Text for the failure message: the state of the world when time ran out (logs, kubectl get). */
  context?: () => Promise<string> | string;
}

/**
 * Resolves with the first value `check` returns that is not undefined; a `check` that throws
 * counts as not yet. Fails after `timeoutMs` naming `what`, the last error and the context.
 */
export async function until<T>(what: string, check: () => Promise<T | undefined>, opts: UntilOptions = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 300));
  }
  throw new Error(`timed out waiting for ${what} (${String(last)})\n${(await opts.context?.()) ?? ''}`);
}
