/**
 * The scratch budget (`[storage] scratch_limit`): how many bytes this process's staged writes may
 * hold on local disk at once, so that uploads and pull-through fills are refused cleanly instead
 * of filling the disk (on Kubernetes: instead of the kubelet evicting the pod, and with it every
 * request in flight, when its scratch `emptyDir` outgrows its size limit).
 *
 * Each staged write takes a `ScratchClaim` and makes it `cover` the bytes it will have written:
 *
 * - a length declared before the bytes come (a Content-Length, a chunk's Content-Range, an
 *   upstream's announced size) is covered up front (`reserve`): more than the whole limit is
 *   refused at once (`ScratchTooLargeError`, never satisfiable); more than is free now waits up to
 *   the wait window for other writes to give bytes back, FIFO, then is refused for now
 *   (`ScratchBusyError`, with a `Retry-After`);
 * - bytes that come without a declared length are covered as they land (`cover`), without
 *   waiting: past what is free the write is cut with one of the same two errors.
 *
 * A claim gives back what it holds beyond its bytes when an append ends (`shrink`: a declared
 * length larger than what came) and everything when its write ends (`release`). The accounting is
 * in memory, per process: a server of several worker processes gives each its share of the limit
 * (docs/configuration.md). Without a limit the budget still counts, and never refuses.
 */
import { Transform } from 'node:stream';
import { NeutralError } from '../errors/neutral.js';
import { formatSize } from '../config/size.js';

/** How long a declared length waits for room by default before it is refused for now. */
export const DEFAULT_SCRATCH_WAIT_MS = 10_000;
/** The `Retry-After` of a refusal for now. */
export const SCRATCH_RETRY_AFTER_SECS = 10;

/** How a process's limit came to be: its share of the server's, when several processes share it. */
export interface ScratchShare {
  /** `[storage] scratch_limit`, for all the server's processes together. */
  totalBytes: number;
  /** How many processes share it equally. */
  processes: number;
}

/** More bytes than the whole limit: no retry helps. */
export class ScratchTooLargeError extends NeutralError {
  readonly kind = 'scratch_too_large';

  constructor(
    readonly bytes: number,
    readonly limitBytes: number,
    share?: ScratchShare,
  ) {
    const limit =
      share && share.processes > 1
        ? `its limit of ${formatSize(limitBytes)} (each of its ${share.processes} worker processes' share of ${formatSize(share.totalBytes)})`
        : `its whole limit of ${formatSize(limitBytes)}`;
    super(
      `this upload needs ${formatSize(bytes)} of the server's scratch space, more than ${limit}: ` +
        'send a smaller file, or ask the server\'s operator to raise [storage] scratch_limit (on Kubernetes, spec.scratch.sizeLimit)',
    );
    this.name = 'ScratchTooLargeError';
  }
}

/** Fits the limit, but not what other writes leave free now: retry later. */
export class ScratchBusyError extends NeutralError {
  readonly kind = 'scratch_busy';

  constructor(
    readonly bytes: number,
    readonly freeBytes: number,
    readonly limitBytes: number,
    readonly retryAfterSecs: number,
  ) {
    super(
      `the server's scratch space is taken by other uploads in flight: ${formatSize(bytes)} needed, ${formatSize(Math.max(freeBytes, 0))} of ` +
        `${formatSize(limitBytes)} free; retry in ${retryAfterSecs} s`,
    );
    this.name = 'ScratchBusyError';
  }
}

export interface ScratchBudgetOptions {
  /** Bytes all claims may hold together; undefined: no limit. */
  limitBytes?: number;
  /** How long `reserve` waits for room before `ScratchBusyError`. */
  waitMs?: number;
  retryAfterSecs?: number;
  /** When `limitBytes` is this process's share of a server's limit: named in the refusals. */
  share?: ScratchShare;
}

interface Waiter {
  claim: ScratchClaim;
  bytes: number;
  grant: () => void;
  timer: NodeJS.Timeout;
}

export class ScratchBudget {
  readonly limitBytes: number | undefined;
  readonly waitMs: number;
  readonly retryAfterSecs: number;
  readonly #share: ScratchShare | undefined;
  #used = 0;
  #refused = 0;
  readonly #queue: Waiter[] = [];

  constructor(opts: ScratchBudgetOptions = {}) {
    if (opts.limitBytes !== undefined && !(Number.isSafeInteger(opts.limitBytes) && opts.limitBytes > 0)) {
      throw new Error(`the scratch limit must be a positive number of bytes, got ${opts.limitBytes}`);
    }
    this.limitBytes = opts.limitBytes;
    this.waitMs = opts.waitMs ?? DEFAULT_SCRATCH_WAIT_MS;
    this.retryAfterSecs = opts.retryAfterSecs ?? SCRATCH_RETRY_AFTER_SECS;
    this.#share = opts.share;
  }

  /** Bytes held by every claim now. */
  get used(): number {
    return this.#used;
  }

  /** Writes refused so far (too large or busy). */
  get refused(): number {
    return this.#refused;
  }

  /** Declared lengths waiting for room. */
  get waiting(): number {
    return this.#queue.length;
  }

  /** A claim holding nothing yet, for one staged write. */
  claim(): ScratchClaim {
    return new ScratchClaim(this);
  }

  /** Takes `extra` bytes more for a write that will then hold `total`, or says why not (null: taken). */
  grow(total: number, extra: number): Error | null {
    // Bytes already streaming in do not queue behind declared lengths that wait: cutting a write
    // midway loses more than a wait does.
    const refusal = this.#refusal(total, extra);
    if (refusal) return refusal;
    this.#used += extra;
    return null;
  }

  /** Grows `claim` by `extra`, waiting for room up to the wait window. */
  wait(claim: ScratchClaim, total: number, extra: number): Promise<void> {
    const limit = this.limitBytes;
    if (limit !== undefined && total > limit) return Promise.reject(this.#tooLarge(total, limit));
    if (this.#queue.length === 0 && this.#used + extra <= (limit ?? Number.POSITIVE_INFINITY)) {
      this.#used += extra;
      claim.granted(extra);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        claim,
        bytes: extra,
        grant: resolve,
        timer: setTimeout(() => {
          this.#queue.splice(this.#queue.indexOf(waiter), 1);
          this.#refused++;
          reject(new ScratchBusyError(total, (limit ?? 0) - this.#used, limit ?? 0, this.retryAfterSecs));
          // The head may have changed: the next in line may fit now.
          this.#next();
        }, this.waitMs),
      };
      waiter.timer.unref();
      this.#queue.push(waiter);
    });
  }

  /** `bytes` given back by a claim. */
  give(bytes: number): void {
    this.#used -= bytes;
    this.#next();
  }

  /** Grants waiters in arrival order while the first fits. */
  #next(): void {
    const limit = this.limitBytes ?? Number.POSITIVE_INFINITY;
    for (let head = this.#queue[0]; head !== undefined && this.#used + head.bytes <= limit; head = this.#queue[0]) {
      this.#queue.shift();
      clearTimeout(head.timer);
      this.#used += head.bytes;
      head.claim.granted(head.bytes);
      head.grant();
    }
  }

  #refusal(total: number, extra: number): Error | null {
    const limit = this.limitBytes;
    if (limit === undefined) return null;
    if (total > limit) return this.#tooLarge(total, limit);
    if (this.#used + extra <= limit) return null;
    this.#refused++;
    return new ScratchBusyError(total, limit - this.#used, limit, this.retryAfterSecs);
  }

  #tooLarge(total: number, limit: number): ScratchTooLargeError {
    this.#refused++;
    return new ScratchTooLargeError(total, limit, this.#share);
  }
}

/** What one staged write holds of the budget. */
export class ScratchClaim {
  #held = 0;

  constructor(private readonly budget: ScratchBudget) {}

  /** Bytes held now. */
  get held(): number {
    return this.#held;
  }

  /**
   * Holds at least `total` bytes in all, taking what is missing now or throwing
   * `ScratchTooLargeError` / `ScratchBusyError` (for bytes that are landing: no wait).
   */
  cover(total: number): void {
    if (total <= this.#held) return;
    const refusal = this.budget.grow(total, total - this.#held);
    if (refusal) throw refusal;
    this.#held = total;
  }

  /** `cover`, but a declared length that does not fit now waits for room up to the budget's wait window. */
  async reserve(total: number): Promise<void> {
    if (total <= this.#held) return;
    await this.budget.wait(this, total, total - this.#held);
  }

  /** Called by the budget when a waiting `reserve` was granted `extra` bytes. */
  granted(extra: number): void {
    this.#held += extra;
  }

  /** Gives back what is held beyond `total` bytes (what the write holds on disk now). */
  shrink(total: number): void {
    if (total >= this.#held) return;
    const extra = this.#held - total;
    this.#held = total;
    this.budget.give(extra);
  }

  /** Gives back everything; calling it again does nothing. */
  release(): void {
    this.shrink(0);
  }

  /**
   * A pass-through that covers every byte before passing it on, starting from `from` bytes: for
   * writes that are not a `BlobStage` (a shared stage's chunk on its way to a scratch file).
   * Past the budget it fails with the refusal, which fails the pipeline it is in.
   */
  meter(from = 0): Transform {
    let seen = from;
    return new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        try {
          this.cover(seen + chunk.length);
        } catch (err) {
          done(err as Error);
          return;
        }
        seen += chunk.length;
        done(null, chunk);
      },
    });
  }
}
