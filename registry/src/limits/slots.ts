/**
 * A FIFO semaphore for work that must not fan out without bound: at most `limit` holders at once,
 * others wait in arrival order. A wait longer than the wait window fails with a 429 carrying
 * `Retry-After`; a waiter whose AbortSignal fires leaves the queue. Without a limit every acquire
 * succeeds at once, but holders are still counted. Knows nothing of what the slots guard: the
 * caller names it in the busy message. A denial is a `SlotsBusyError` (kind `slots_busy`), which
 * each ecosystem answers with its own 429.
 */
import { NeutralError } from '../errors/neutral.js';

export const DEFAULT_SLOT_WAIT_MS = 30_000;
export const DEFAULT_RETRY_AFTER_SECS = 10;

export interface SlotsOptions {
  /** Maximum holders at once; undefined means no cap. */
  limit?: number;
  /** How long a request may wait for a slot before it is denied. */
  waitMs?: number;
  /** The `Retry-After` a denied request carries. */
  retryAfterSecs?: number;
  /** What is capped, for the error of a bad limit (`upstream concurrency`). */
  what?: string;
  /** The start of a denial's message (`the upstream is busy: ...`); `; retry in N s` is appended. */
  busy?: string;
}

/** A request that found no free slot within the wait window: the client should retry later. */
export class SlotsBusyError extends NeutralError {
  readonly kind = 'slots_busy';

  constructor(
    busy: string,
    readonly retryAfterSecs: number,
  ) {
    super(`${busy}; retry in ${retryAfterSecs} s`);
    this.name = 'SlotsBusyError';
  }
}

/** Gives the slot back; calling it again does nothing. */
export type ReleaseSlot = () => void;

interface Waiter {
  grant: (release: ReleaseSlot) => void;
  fail: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export class Slots {
  readonly limit: number | undefined;
  readonly waitMs: number;
  readonly retryAfterSecs: number;
  readonly #busy: string;
  #inflight = 0;
  #denied = 0;
  readonly #queue: Waiter[] = [];

  constructor(opts: SlotsOptions = {}) {
    const what = opts.what ?? 'the slot limit';
    if (opts.limit !== undefined && !(Number.isInteger(opts.limit) && opts.limit >= 1)) {
      throw new Error(`${what} must be a positive integer, got ${opts.limit}`);
    }
    this.limit = opts.limit;
    this.waitMs = opts.waitMs ?? DEFAULT_SLOT_WAIT_MS;
    this.retryAfterSecs = opts.retryAfterSecs ?? DEFAULT_RETRY_AFTER_SECS;
    this.#busy = opts.busy ?? 'the server is busy: no slot freed in time';
  }

  /** Holders right now. */
  get inflight(): number {
    return this.#inflight;
  }

  /** Requests waiting for a slot. */
  get waiting(): number {
    return this.#queue.length;
  }

  /** Requests denied with 429 so far. */
  get denied(): number {
    return this.#denied;
  }

  /** Waits for a slot. Rejects with the busy 429 after the wait window, or on abort. */
  acquire(signal?: AbortSignal): Promise<ReleaseSlot> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    if (this.limit === undefined || (this.#inflight < this.limit && this.#queue.length === 0)) {
      return Promise.resolve(this.#take());
    }
    return new Promise<ReleaseSlot>((resolve, reject) => {
      const onAbort = (): void => {
        this.#remove(waiter);
        reject(abortError(signal));
      };
      const waiter: Waiter = {
        grant: (release) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
        fail: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
        timer: setTimeout(() => {
          this.#remove(waiter);
          this.#denied++;
          waiter.fail(this.denial(this.#busy, this.retryAfterSecs));
        }, this.waitMs),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#queue.push(waiter);
    });
  }

  /** Runs `fn` holding a slot. For streamed bodies, hold the slot with `acquire` instead. */
  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const release = await this.acquire(signal);
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** The error of a wait that ran out; a subclass may answer a more specific one. */
  protected denial(busy: string, retryAfterSecs: number): SlotsBusyError {
    return new SlotsBusyError(busy, retryAfterSecs);
  }

  #take(): ReleaseSlot {
    this.#inflight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inflight--;
      this.#next();
    };
  }

  #next(): void {
    if (this.limit !== undefined && this.#inflight >= this.limit) return;
    const waiter = this.#queue.shift();
    if (!waiter) return;
    clearTimeout(waiter.timer);
    waiter.grant(this.#take());
  }

  #remove(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    const i = this.#queue.indexOf(waiter);
    if (i >= 0) this.#queue.splice(i, 1);
  }
}

function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('the request was aborted while waiting for a slot');
}
