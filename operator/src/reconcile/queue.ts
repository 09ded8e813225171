/**
 * A keyed work queue: each key (a registry, reconcile/keys.ts) is worked on by one worker at a
 * time, different keys in parallel up to `concurrency`; a key added while it is being worked on
 * runs once more after, however many times it was added. A failed run is retried after a per-key
 * exponential backoff (reset by a success). Events never wait behind an unrelated registry's slow
 * reconcile.
 */
export interface QueueOptions {
  concurrency?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  onError?: (key: string, err: unknown, retryInMs: number) => void;
}

export class KeyedQueue {
  readonly #pending = new Set<string>();
  readonly #running = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, { timer: NodeJS.Timeout; due: number }>();
  readonly #concurrency: number;
  readonly #base: number;
  readonly #max: number;
  #stopped = false;
  #idle: Array<() => void> = [];

  constructor(
    private readonly work: (key: string) => Promise<void>,
    private readonly opts: QueueOptions = {},
  ) {
    this.#concurrency = opts.concurrency ?? 4;
    this.#base = opts.baseDelayMs ?? 500;
    this.#max = opts.maxDelayMs ?? 60_000;
  }

  add(key: string): void {
    if (this.#stopped) return;
    if (this.#running.has(key)) {
      this.#dirty.add(key);
      return;
    }
    this.#pending.add(key);
    this.#pump();
  }

  /**
   * Adds `key` after `ms` (a periodic resync, a backoff, a grace period for a burst of events).
   * A key waits on one timer: the earliest asked for wins, so an event is never held back by a
   * resync due later, and a burst of events within `ms` becomes one run.
   */
  addAfter(key: string, ms: number): void {
    if (this.#stopped) return;
    const due = Date.now() + ms;
    const existing = this.#timers.get(key);
    if (existing && existing.due <= due) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      this.add(key);
    }, ms).unref();
    this.#timers.set(key, { timer, due });
  }

  /** Resolves once nothing is pending or running (timers aside). */
  idle(): Promise<void> {
    if (this.#pending.size === 0 && this.#running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  stop(): void {
    this.#stopped = true;
    for (const t of this.#timers.values()) clearTimeout(t.timer);
    this.#timers.clear();
    this.#pending.clear();
  }

  #pump(): void {
    for (const key of this.#pending) {
      if (this.#running.size >= this.#concurrency) return;
      if (this.#running.has(key)) continue;
      this.#pending.delete(key);
      this.#running.add(key);
      void this.#run(key);
    }
  }

  async #run(key: string): Promise<void> {
    try {
      await this.work(key);
      this.#failures.delete(key);
    } catch (err) {
      const n = (this.#failures.get(key) ?? 0) + 1;
      this.#failures.set(key, n);
      const delay = Math.min(this.#max, this.#base * 2 ** (n - 1));
      this.opts.onError?.(key, err, delay);
      this.addAfter(key, delay);
    } finally {
      this.#running.delete(key);
      if (this.#dirty.delete(key)) this.#pending.add(key);
      this.#pump();
      if (this.#pending.size === 0 && this.#running.size === 0) for (const resolve of this.#idle.splice(0)) resolve();
    }
  }
}
