/**
 * The server's archive walks: a cap on how many run at once, and the rendered listings kept by key.
 *
 * Listing or previewing walks the archive (for a tar, decompressing all of it), so N clients
 * browsing one large archive must not start N walks. An archive stored under a digest never
 * changes, and neither does its listing: concurrent misses for one key share one walk, and later
 * requests answer from memory without a slot. Whether the archive is still stored is the caller's
 * question, asked before every answer, so a deleted archive stops being listed at once.
 */
import { availableParallelism } from 'node:os';
import { Slots } from '../limits/slots.js';
import { ByteLru } from '../storage/byte-lru.js';

/** Total bytes of rendered listings kept; a full listing of 10,000 members is about 1 MiB. */
export const DEFAULT_LISTING_CACHE_BYTES = 32 * 1024 * 1024;

/**
 * Walks at once. A walk is inflate on the thread pool plus parsing on the event loop, so walks
 * beyond the cores only slow each other down; queued ones start in arrival order instead. At least
 * two, so one long walk never holds up every other archive.
 */
export function defaultWalkLimit(): number {
  return Math.max(2, availableParallelism());
}

export interface ArchiveWalksOptions {
  /** Walks at once; default `defaultWalkLimit()`. */
  limit?: number;
  /** How long a request waits for a walk slot before its 429; default 30 s, as for upstream fetches. */
  waitMs?: number;
  cacheBytes?: number;
}

interface Flight {
  promise: Promise<Buffer>;
  /** Callers still waiting for the listing. */
  joiners: number;
  /** The walk holds its slot: giving up no longer saves anything. */
  walking: boolean;
  /** Gives up the flight's place in the slot queue once every caller has gone. */
  stop: AbortController;
}

export class ArchiveWalks {
  readonly slots: Slots;
  readonly #listings: ByteLru<Buffer>;
  // Not PromiseFlights: callers leave one by one, and the last to leave withdraws the shared wait.
  readonly #flights = new Map<string, Flight>();

  constructor(opts: ArchiveWalksOptions = {}) {
    this.slots = new Slots({
      limit: opts.limit ?? defaultWalkLimit(),
      ...(opts.waitMs !== undefined ? { waitMs: opts.waitMs } : {}),
      what: 'the archive walk limit',
      busy: 'the server is busy: no archive walk slot freed in time',
    });
    this.#listings = new ByteLru(opts.cacheBytes ?? DEFAULT_LISTING_CACHE_BYTES, (bytes) => bytes.length);
  }

  /** Callers waiting for a listing being rendered (however many share one walk). */
  get waiters(): number {
    let n = 0;
    for (const flight of this.#flights.values()) n += flight.joiners;
    return n;
  }

  /** Runs one walk that is not cached (a member preview) holding a slot; `signal` gives up the wait. */
  run<T>(walk: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.slots.run(walk, signal);
  }

  /**
   * The listing for `key`, from memory or rendered by `render` holding a slot. `key` must name
   * everything the listing depends on (the archive's digest, a nested path). Failures are not kept.
   */
  listing(key: string, render: () => Promise<Buffer>, signal?: AbortSignal): Promise<Buffer> {
    const hit = this.#listings.get(key);
    if (hit) return Promise.resolve(hit);
    if (signal?.aborted) return Promise.reject(reasonOf(signal));
    const flight = this.#flights.get(key) ?? this.#start(key, render);
    return this.#join(key, flight, signal);
  }

  #start(key: string, render: () => Promise<Buffer>): Flight {
    const stop = new AbortController();
    const flight: Flight = { joiners: 0, walking: false, stop, promise: Promise.resolve(Buffer.alloc(0)) };
    flight.promise = this.slots
      .run(async () => {
        flight.walking = true;
        const bytes = await render();
        this.#listings.set(key, bytes);
        return bytes;
      }, stop.signal)
      .finally(() => {
        if (this.#flights.get(key) === flight) this.#flights.delete(key);
      });
    // Every caller may have gone before it settles; each caller handles its own copy.
    flight.promise.catch(() => undefined);
    this.#flights.set(key, flight);
    return flight;
  }

  #join(key: string, flight: Flight, signal: AbortSignal | undefined): Promise<Buffer> {
    flight.joiners++;
    return new Promise<Buffer>((resolve, reject) => {
      let left = false;
      const leave = (): boolean => {
        if (left) return false;
        left = true;
        flight.joiners--;
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const onAbort = (): void => {
        if (!leave()) return;
        reject(reasonOf(signal));
        if (flight.joiners > 0 || flight.walking) return;
        // Removed now, not when the wait rejects: a caller arriving meanwhile starts a fresh flight.
        if (this.#flights.get(key) === flight) this.#flights.delete(key);
        flight.stop.abort();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      flight.promise.then(
        (bytes) => {
          if (leave()) resolve(bytes);
        },
        (err: unknown) => {
          if (leave()) reject(err);
        },
      );
    });
  }
}

function reasonOf(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error('the request was aborted while waiting for an archive walk');
}
