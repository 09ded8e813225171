/**
 * Single-flight with streaming fan-out for content that ends up in the BlobStore (files, blobs).
 *
 * Concurrent misses for one key share one upstream fetch. The first caller's `start` opens the
 * upstream body; its bytes stream into a staged write of the store (`BlobStage`, hashed on the
 * way in), and every waiter — including one that joins mid-transfer — gets its own stream that
 * reads the stage from the first byte and tails it as it grows. When the body ends and its digest
 * verifies (against the caller's expected sha256, or the computed one), the waiters' streams end
 * and the stage is committed under that digest (after the caller's `holder` has taken its hold on
 * it): the bytes are hashed once, on the way in. Later requests find the blob in the store. On a
 * digest mismatch or an upstream failure mid-transfer, every waiter's stream errors, nothing is
 * published and the stage is aborted.
 *
 * Each flight settles with one `FlightOutcome`, reported once to `onOutcome`, so callers count a
 * shared fetch once, not once per waiter.
 */
import type { Readable } from 'node:stream';
import type { Holder } from '../storage/holds.js';
import { DigestMismatchError, type BlobInfo, type BlobStore, type Sha256Hex } from '../storage/types.js';
import type { CounterSink } from '../observe/counters.js';
import { Spool } from './spool.js';

/** What `start` hands over: the upstream body and what is known about it. */
export interface FlightSource<M> {
  body: Readable;
  /** The sha256 the bytes must have; without it the computed digest is taken as is. */
  expected?: Sha256Hex;
  /** The announced length (Content-Length); a body of any other length is an upstream failure. */
  size?: number;
  /** Whatever the caller needs to answer every waiter (content type, upstream headers...). */
  meta: M;
}

export type FlightOutcome =
  | { kind: 'published'; key: string; info: BlobInfo }
  | { kind: 'rejected'; key: string; error: DigestMismatchError }
  | { kind: 'upstream_error'; key: string; error: Error }
  /** The bytes verified and every waiter got them, but the store refused them. */
  | { kind: 'store_error'; key: string; error: Error }
  /** `start` threw; every waiter's `open` rejected with that error. The caller classifies it. */
  | { kind: 'not_started'; key: string; error: unknown }
  /** `recheck` found the content already stored; every waiter's `open` returned null. */
  | { kind: 'already_stored'; key: string };

export interface Delivery<M> {
  /** This waiter's bytes, from the first one. Errors rather than end short. */
  stream: Readable;
  size: number | undefined;
  meta: M;
  /** Settles (never rejects) when the flight is decided. */
  outcome: Promise<FlightOutcome>;
}

export interface OpenOptions {
  /**
   * Checked once by the flight before `start`: true means the content is already in the store
   * (a flight that finished between the caller's own store lookup and `open`), and `open`
   * returns null so the caller reads the store instead.
   */
  recheck?: () => Promise<boolean>;
}

export interface BlobFlightsOptions {
  /** Stages every fetch (read back by the waiters) and publishes it on commit. */
  store: BlobStore;
  /** Counts `rejected` and `upstream_errors` once per failed flight. */
  counters?: CounterSink;
  /** Holds every published blob, before it is stored; the caller's ecosystem names it. */
  holder?: Holder;
  onOutcome?: (outcome: FlightOutcome) => void;
}

interface Head<M> {
  meta: M;
  size: number | undefined;
  spool: Spool;
}

class Flight<M> {
  readonly head: Promise<Head<M> | null>;
  readonly outcome: Promise<FlightOutcome>;
  #spool: Spool | undefined;
  #resolveHead!: (head: Head<M> | null) => void;
  #rejectHead!: (err: unknown) => void;
  #resolveOutcome!: (o: FlightOutcome) => void;

  constructor(readonly key: string) {
    this.head = new Promise<Head<M> | null>((resolve, reject) => {
      this.#resolveHead = resolve;
      this.#rejectHead = reject;
    });
    // Waiters that give up on `head` must not leave an unhandled rejection behind.
    this.head.catch(() => undefined);
    this.outcome = new Promise((resolve) => (this.#resolveOutcome = resolve));
  }

  /** Reserves a place for a waiter that has not read `head` yet (see Spool.reserve). */
  reserve(): (() => void) | undefined {
    return this.#spool?.reserve();
  }

  async run(opts: BlobFlightsOptions, start: () => Promise<FlightSource<M>>, recheck?: () => Promise<boolean>): Promise<FlightOutcome> {
    const key = this.key;
    let source: FlightSource<M>;
    try {
      if (recheck && (await recheck())) {
        this.#resolveHead(null);
        return this.#settle({ kind: 'already_stored', key });
      }
      source = await start();
    } catch (error) {
      this.#rejectHead(error);
      return this.#settle({ kind: 'not_started', key, error });
    }
    let spool: Spool;
    try {
      spool = new Spool(await opts.store.stage({ readBack: true }));
    } catch (error) {
      source.body.destroy();
      this.#rejectHead(error);
      return this.#settle({ kind: 'not_started', key, error });
    }
    this.#spool = spool;
    this.#resolveHead({ meta: source.meta, size: isLength(source.size) ? source.size : undefined, spool });
    try {
      try {
        await spool.fill(source.body);
      } catch (err) {
        throw upstreamFailure(err);
      }
      if (isLength(source.size) && spool.written !== source.size) {
        throw new Error(`upstream body ended after ${spool.written} of ${source.size} bytes`);
      }
      const digest = spool.digest();
      if (source.expected !== undefined && digest !== source.expected) {
        const error = new DigestMismatchError(source.expected, digest);
        spool.fail(error);
        opts.counters?.add('rejected');
        return this.#settle({ kind: 'rejected', key, error });
      }
      spool.complete();
      try {
        await opts.holder?.hold(digest);
        const info = await spool.commit(digest);
        return this.#settle({ kind: 'published', key, info });
      } catch (err) {
        return this.#settle({ kind: 'store_error', key, error: asError(err) });
      }
    } catch (err) {
      const error = asError(err);
      spool.fail(error);
      opts.counters?.add('upstream_errors');
      return this.#settle({ kind: 'upstream_error', key, error });
    }
  }

  /** Called once the flight has left the map: no waiter can join any more. */
  async dispose(): Promise<void> {
    await this.#spool?.dispose();
  }

  #settle(outcome: FlightOutcome): FlightOutcome {
    this.#resolveOutcome(outcome);
    return outcome;
  }
}

export class BlobFlights {
  readonly #opts: BlobFlightsOptions;
  readonly #flights = new Map<string, Flight<unknown>>();

  constructor(opts: BlobFlightsOptions) {
    this.#opts = opts;
  }

  /** Flights currently running. */
  get size(): number {
    return this.#flights.size;
  }

  /**
   * Joins the flight for `key`, starting it with `start` when none runs. Resolves once the
   * upstream answered (rejects with `start`'s error), or null when `recheck` found it stored.
   * All waiters of one key must agree on `M`.
   */
  async open<M>(key: string, start: () => Promise<FlightSource<M>>, opts: OpenOptions = {}): Promise<Delivery<M> | null> {
    let flight = this.#flights.get(key) as Flight<M> | undefined;
    if (!flight) {
      const created = new Flight<M>(key);
      flight = created;
      this.#flights.set(key, created as Flight<unknown>);
      void created.run(this.#opts, start, opts.recheck).then(async (outcome) => {
        if (this.#flights.get(key) === (created as Flight<unknown>)) this.#flights.delete(key);
        await created.dispose();
        this.#report(outcome);
      });
    }
    // Hold the spool open for this waiter while it waits for `head` (a flight can settle meanwhile).
    let release = flight.reserve();
    const head = await flight.head;
    if (!head) {
      release?.();
      return null;
    }
    release ??= head.spool.reserve();
    return { stream: head.spool.reader(release), size: head.size, meta: head.meta, outcome: flight.outcome };
  }

  #report(outcome: FlightOutcome): void {
    try {
      this.#opts.onOutcome?.(outcome);
    } catch {
      // A reporting hook must not break the flight machinery.
    }
  }
}

function isLength(n: number | undefined): n is number {
  return n !== undefined && Number.isSafeInteger(n) && n >= 0;
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/** Wraps a transfer failure so its message says what happened without quoting the upstream. */
function upstreamFailure(err: unknown): Error {
  const e = asError(err);
  if (e.name === 'UpstreamError') return e;
  const code = (e as NodeJS.ErrnoException).code;
  return new Error(`upstream transfer failed${code ? ` (${code})` : ''}: ${e.message === 'aborted' ? 'connection closed mid-body' : e.message}`, { cause: e });
}
