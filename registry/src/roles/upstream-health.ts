/**
 * Whether an index's upstream answered lately (`upstream.offline` of `/+status`). After a failure
 * the upstream is left alone for a short backoff: cached documents are served stale at once
 * instead of every request waiting out a connect timeout first. A miss still tries the upstream.
 */
export const DEFAULT_OFFLINE_BACKOFF_MS = 10_000;

export class UpstreamHealth {
  #offline = false;
  #retryAt = 0;
  #lastError: string | undefined;

  constructor(readonly backoffMs = DEFAULT_OFFLINE_BACKOFF_MS) {}

  get offline(): boolean {
    return this.#offline;
  }

  /** The last failure's message (already free of credentials and query strings). */
  get lastError(): string | undefined {
    return this.#lastError;
  }

  up(): void {
    this.#offline = false;
    this.#lastError = undefined;
  }

  down(err: unknown, now: number): void {
    this.#offline = true;
    this.#retryAt = now + this.backoffMs;
    this.#lastError = err instanceof Error ? err.message : String(err);
  }

  /** True while a revalidation should not be tried (serve stale instead). */
  resting(now: number): boolean {
    return this.#offline && now < this.#retryAt;
  }
}
