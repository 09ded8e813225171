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
 *
 * With `peers` (a server of several worker processes), a flight is also shared across them
 * (`flight-peers.ts`): a process whose flight follows another's tails that one's staged file, and
 * reports nothing (the leading process counts the fetch).
 */
import type { Readable } from 'node:stream';
import type { Holder } from '../storage/holds.js';
import { DigestMismatchError, type BlobInfo, type BlobStage, type BlobStore, type Sha256Hex } from '../storage/types.js';
import type { CounterSink } from '../observe/counters.js';
import { FileTail } from './file-tail.js';
import { RecentEnds } from '../storage/recent-ends.js';
import type { FlightPeers, FollowFlight, LeadFlight, PeerEnd, PeerEvent } from './flight-peers.js';
import { Spool } from './spool.js';
import { UpstreamError } from './upstream-error.js';
import { formatSize } from '../config/size.js';
import { ScratchBusyError, ScratchTooLargeError } from '../storage/scratch-budget.js';

/** What `start` hands over: the upstream body and what is known about it. */
export interface FlightSource<M> {
  body: Readable;
  /** The sha256 the bytes must have; without it the computed digest is taken as is. */
  expected?: Sha256Hex;
  /** The announced length (Content-Length); a body of any other length is an upstream failure. */
  size?: number;
  /** Whatever the caller needs to answer every waiter (content type, upstream headers...); JSON when shared with `peers`. */
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
  /**
   * When (`Date.now()`) the caller's own lookup that found nothing began. With it, `recheck` runs
   * only when a flight of the key may have ended since (`recent-ends.ts`): otherwise nothing can
   * have been published in between, and the store is not asked again.
   */
  since?: number;
}

export interface BlobFlightsOptions {
  /** Stages every fetch (read back by the waiters) and publishes it on commit. */
  store: BlobStore;
  /** Counts `rejected` and `upstream_errors` once per failed flight. */
  counters?: CounterSink;
  /** Holds every published blob, before it is stored; the caller's ecosystem names it. */
  holder?: Holder;
  onOutcome?: (outcome: FlightOutcome) => void;
  /** Shares every flight with the server's other processes; `scope` keeps this owner's keys apart from others'. */
  peers?: { flights: FlightPeers; scope: string };
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

  async run(opts: BlobFlightsOptions, start: () => Promise<FlightSource<M>>, recheck?: () => Promise<boolean>, lead?: LeadFlight): Promise<FlightOutcome> {
    const key = this.key;
    const tell = (end: PeerEnd): void => lead?.send({ type: 'end', end });
    let source: FlightSource<M>;
    try {
      if (recheck && (await recheck())) {
        this.#resolveHead(null);
        tell({ kind: 'already_stored' });
        return this.#settle({ kind: 'already_stored', key });
      }
      source = await start();
    } catch (error) {
      tell({ kind: 'not_started' });
      this.#rejectHead(error);
      return this.#settle({ kind: 'not_started', key, error });
    }
    let stage: BlobStage;
    const size = isLength(source.size) ? source.size : undefined;
    try {
      // An announced size is reserved from the scratch budget first: a fill that cannot fit is
      // refused before its transfer begins (scratch-budget.ts; fillRefusal says how).
      // A flight starts only for bytes the store lacks (`absent`).
      stage = await opts.store.stage({ readBack: true, expected: source.expected, absent: true, ...(size === undefined ? {} : { declared: size }) });
    } catch (err) {
      const error = fillRefusal(err);
      source.body.destroy();
      tell({ kind: 'not_started' });
      this.#rejectHead(error);
      return this.#settle({ kind: 'not_started', key, error });
    }
    const spool = new Spool(stage);
    this.#spool = spool;
    if (lead && stage.localPath === undefined) {
      // Nothing the other processes could tail: each fetches for itself.
      tell({ kind: 'not_started' });
      lead = undefined;
    }
    lead?.send({ type: 'head', head: { meta: source.meta, size, path: stage.localPath! } });
    this.#resolveHead({ meta: source.meta, size, spool });
    try {
      try {
        await stage.append(source.body, {
          onWritten: (written, landed) => {
            spool.grew(landed);
            lead?.send({ type: 'progress', written });
          },
        });
      } catch (err) {
        throw upstreamFailure(err);
      }
      if (size !== undefined && stage.size !== size) {
        throw new Error(`upstream body ended after ${stage.size} of ${size} bytes`);
      }
      const digest = stage.digest();
      if (source.expected !== undefined && digest !== source.expected) {
        const error = new DigestMismatchError(source.expected, digest);
        spool.fail(error);
        tell({ kind: 'rejected', expected: source.expected, actual: digest });
        opts.counters?.add('rejected');
        return this.#settle({ kind: 'rejected', key, error });
      }
      spool.complete();
      lead?.send({ type: 'progress', written: stage.size, verified: true });
      try {
        // A flight starts only for bytes the store lacks: their holds document is new too.
        await opts.holder?.hold(digest, stage.size, { fresh: true });
        const info = await stage.commit(digest);
        tell({ kind: 'published', info });
        return this.#settle({ kind: 'published', key, info });
      } catch (err) {
        const error = asError(err);
        tell({ kind: 'store_error', message: error.message });
        return this.#settle({ kind: 'store_error', key, error });
      }
    } catch (err) {
      const error = asError(err);
      spool.fail(error);
      tell({ kind: 'upstream_error', message: error.message });
      opts.counters?.add('upstream_errors');
      return this.#settle({ kind: 'upstream_error', key, error });
    }
  }

  /**
   * Follows another process's flight of this key: the waiters read the leader's staged file as it
   * grows. Null when this process must fetch for itself (the leader did not start a transfer it
   * can tail, or its file was gone before this one opened it and its bytes are not stored).
   */
  follow(peer: FollowFlight): Promise<FlightOutcome | null> {
    const key = this.key;
    return new Promise((resolve) => {
      let tail: FileTail | null = null;
      let spool: Spool | undefined;
      let decided = false;
      const settle = (outcome: FlightOutcome | null): void => {
        if (decided) return;
        decided = true;
        resolve(outcome ? this.#settle(outcome) : null);
      };
      const apply = async (event: PeerEvent): Promise<void> => {
        if (decided) return;
        switch (event.type) {
          case 'head': {
            tail = await FileTail.open(event.head.path);
            if (!tail) return; // committed or discarded already: the end says which
            spool = new Spool(tail);
            this.#spool = spool;
            this.#resolveHead({ meta: event.head.meta as M, size: event.head.size, spool });
            return;
          }
          case 'progress':
            if (!tail || !spool) return;
            tail.size = event.written;
            spool.grew();
            if (event.verified) spool.complete();
            return;
          case 'end':
            return settle(this.#followed(event.end, spool));
        }
      };
      // One event at a time, in order: a head's file opens before the progress that follows it.
      let queue = Promise.resolve();
      peer.listen((event) => {
        queue = queue
          .then(() => apply(event))
          .catch((err: unknown) => {
            // The file could not be read here: waiters already reading fail, others fetch anew.
            if (!spool) return settle(null);
            const error = asError(err);
            spool.fail(error);
            settle({ kind: 'upstream_error', key, error });
          });
      });
    });
  }

  /** A follower's outcome for the leader's `end`; null: fetch for itself. */
  #followed(end: PeerEnd, spool: Spool | undefined): FlightOutcome | null {
    const key = this.key;
    if (end.kind === 'already_stored' || (end.kind === 'published' && !spool)) {
      this.#resolveHead(null);
      return { kind: 'already_stored', key };
    }
    // Without a spool this process's waiters got nothing yet: a fetch of their own serves them.
    if (!spool || end.kind === 'not_started') return null;
    switch (end.kind) {
      case 'published':
        spool.complete();
        return { kind: 'published', key, info: end.info };
      case 'store_error':
        spool.complete();
        return { kind: 'store_error', key, error: new Error(end.message) };
      case 'rejected': {
        const error = new DigestMismatchError(end.expected, end.actual);
        spool.fail(error);
        return { kind: 'rejected', key, error };
      }
      case 'upstream_error': {
        const error = new Error(end.message);
        spool.fail(error);
        return { kind: 'upstream_error', key, error };
      }
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
  /** When this process's last flights of each key ended: whether a `recheck` can find anything. */
  readonly #ended = new RecentEnds();

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
      void this.#fly(created, start, opts).then(async ({ outcome, followed }) => {
        // Noted before the flight leaves the map: a caller that looked before it ended and opens
        // after it left rechecks the store.
        this.#ended.ended(key);
        if (this.#flights.get(key) === (created as Flight<unknown>)) this.#flights.delete(key);
        await created.dispose();
        // A followed flight was the leading process's fetch: that one reports it.
        if (!followed) this.#report(outcome);
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

  /** Runs `flight` here, or follows the server's other process that runs it (`peers`). */
  async #fly<M>(flight: Flight<M>, start: () => Promise<FlightSource<M>>, opts: OpenOptions): Promise<{ outcome: FlightOutcome; followed: boolean }> {
    const peers = this.#opts.peers;
    const { since } = opts;
    let role: LeadFlight | FollowFlight | undefined;
    // Whether every process that could have published the bytes was asked.
    let asked = peers === undefined;
    try {
      role = await peers?.flights.join(`${peers.scope}\0${flight.key}`, since);
      asked = true;
    } catch {
      // The other processes cannot be asked (the primary is going away): fetch alone.
    }
    if (role?.role === 'follow') {
      const outcome = await flight.follow(role);
      if (outcome) return { outcome, followed: true };
      // The leader's flight ended without one this process could share: it may have stored them.
      role = undefined;
      asked = false;
    }
    // Without `since`, or when a flight here or in another process may have published the bytes
    // since the caller looked (or the others could not be asked), the store is asked again.
    const mayBeStored = since === undefined || !asked || this.#ended.endedSince(flight.key, since) || (role?.role === 'lead' && role.endedSince === true);
    return { outcome: await flight.run(this.#opts, start, mayBeStored ? opts.recheck : undefined, role), followed: false };
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

/**
 * Wraps a transfer failure so its message says what happened without quoting the upstream. The
 * wrapper is a plain error, not an `UpstreamError`: its message repeats the cause's, which (a
 * socket's) may quote a host or path, and an `UpstreamError`'s message is shown to clients.
 */
/**
 * A fill larger than the whole scratch limit can never be kept, so it is no request's fault and no
 * retry helps: the upstream's file is too large for this server (`too_large`, answered as an
 * upstream failure). One that fits, but not now, stays `ScratchBusyError`: retry later.
 */
function fillRefusal(err: unknown): unknown {
  if (!(err instanceof ScratchTooLargeError)) return err;
  return new UpstreamError(
    'too_large',
    null,
    `the upstream's file (${formatSize(err.bytes)}) is larger than this server's scratch limit of ${formatSize(err.limitBytes)} and cannot pass through it; ` +
      'ask the operator to raise [storage] scratch_limit (on Kubernetes, spec.scratch.sizeLimit)',
  );
}

function upstreamFailure(err: unknown): Error {
  const e = asError(err);
  // The scratch budget cut the fill midway: this server's refusal, not the upstream's failure.
  if (e instanceof UpstreamError || e instanceof ScratchBusyError || e instanceof ScratchTooLargeError) return e;
  const code = (e as NodeJS.ErrnoException).code;
  return new Error(`upstream transfer failed${code ? ` (${code})` : ''}: ${e.message === 'aborted' ? 'connection closed mid-body' : e.message}`, { cause: e });
}
