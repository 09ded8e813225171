/**
 * The per-index upstream concurrency cap (`upstream_concurrency`): the general `Slots` semaphore
 * with the upstream's wording. At most `limit` upstream fetches hold a slot at once; others wait in
 * FIFO order. A wait longer than the wait window (30 s by default, as the spec says) fails with a
 * `SlotWaitTimeoutError` (a 429 with `Retry-After` to the client). Without a limit every acquire succeeds at once, but in-flight fetches
 * are still counted for the gauge (`inflight`; `denied` feeds `upstream_rate_limit_denied_total`).
 */
import type { CachedIndex } from '../config/types.js';
import { SlotsBusyError, Slots } from './slots.js';

export { DEFAULT_RETRY_AFTER_SECS, DEFAULT_SLOT_WAIT_MS } from './slots.js';

export interface UpstreamSlotsOptions {
  /** Maximum fetches in flight; undefined means no cap. */
  limit?: number;
  /** How long a request may wait for a slot before it is denied. */
  waitMs?: number;
  /** The `Retry-After` a denied request carries. */
  retryAfterSecs?: number;
}

const BUSY = 'the upstream is busy: no upstream fetch slot freed in time';

/** A request that found no free upstream slot within the wait window. */
export class SlotWaitTimeoutError extends SlotsBusyError {
  constructor(retryAfterSecs: number) {
    super(BUSY, retryAfterSecs);
    this.name = 'SlotWaitTimeoutError';
  }
}

export class UpstreamSlots extends Slots {
  constructor(opts: UpstreamSlotsOptions = {}) {
    super({ ...opts, what: 'upstream concurrency', busy: BUSY });
  }

  protected override denial(_busy: string, retryAfterSecs: number): SlotsBusyError {
    return new SlotWaitTimeoutError(retryAfterSecs);
  }
}

/**
 * Every cached index's upstream cap, one per index for the whole server: the ecosystem that
 * fetches through it and the metrics that report on it see the same slots.
 */
export class UpstreamSlotsByIndex {
  readonly #byName = new Map<string, UpstreamSlots>();

  /** The cap of `index`, made on first use from its `upstream_concurrency`. */
  for(index: CachedIndex): UpstreamSlots {
    let slots = this.#byName.get(index.name);
    if (!slots) {
      slots = new UpstreamSlots(index.upstreamConcurrency !== undefined ? { limit: index.upstreamConcurrency } : {});
      this.#byName.set(index.name, slots);
    }
    return slots;
  }
}
