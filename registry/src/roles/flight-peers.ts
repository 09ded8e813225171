/**
 * The other processes of a server that fetch into the same store (its worker processes): through
 * them, concurrent misses of one key in several processes share one upstream fetch, as misses in
 * one process share one through `single-flight.ts`.
 *
 * The process that joins a key first leads: it fetches, stages and publishes as it would alone,
 * and tells the others what happens (`PeerEvent`, in order). Every other process follows: it opens
 * the leader's staged file on this machine by its path, tails it as `progress` advances, and ends
 * as the leader's flight ends. A follower that cannot take part (the leader could not start, or its
 * stage has no file here) fetches for itself, as a process alone would.
 *
 * Everything crosses a process boundary as JSON: a flight's `meta` too.
 */
import type { KeyLocks } from '../storage/key-locks.js';
import type { BlobInfo } from '../storage/types.js';

export interface FlightHead {
  meta: unknown;
  /** The announced length, when the upstream gave one. */
  size: number | undefined;
  /** The staged file on this machine that the leader writes (`BlobStage.localPath`). */
  path: string;
}

/** How a leader's flight ended, as its followers learn it. */
export type PeerEnd =
  | { kind: 'published'; info: BlobInfo }
  /** Verified and delivered whole, but the store refused it. */
  | { kind: 'store_error'; message: string }
  | { kind: 'rejected'; expected: string; actual: string }
  /** The transfer broke: the upstream's body, or the leading process itself (it stopped). */
  | { kind: 'upstream_error'; message: string }
  /** The leader did not start a transfer its followers can tail: each fetches for itself. */
  | { kind: 'not_started' }
  /** The leader found the content stored already: read the store. */
  | { kind: 'already_stored' };

export type PeerEvent =
  | { type: 'head'; head: FlightHead }
  /** Bytes landed in the staged file. `verified`: they are whole and hash right, read to the end. */
  | { type: 'progress'; written: number; verified?: boolean }
  | { type: 'end'; end: PeerEnd };

export interface LeadFlight {
  readonly role: 'lead';
  /** A flight of the key ended in some process at or after the `since` given to `join` (`recent-ends.ts`). */
  readonly endedSince?: boolean;
  /** Tells every follower; `progress` may be coalesced (the latest wins), nothing else is. */
  send(event: PeerEvent): void;
}

export interface FollowFlight {
  readonly role: 'follow';
  /** Calls `listener` with every event of the leader from the first, in order, then as they come. */
  listen(listener: (event: PeerEvent) => void): void;
}

export interface FlightPeers {
  /**
   * Joins the server-wide flight of `key`: leads it when none runs, else follows the one that does.
   * `since`: when the caller's lookup of the store began; a leader learns whether a flight of the
   * key ended since (`LeadFlight.endedSince`).
   */
  join(key: string, since?: number): Promise<LeadFlight | FollowFlight>;
}

/**
 * What the processes of one server coordinate so that each upstream miss is fetched once by all of
 * them: streamed fetches of files and blobs (`flights`), and the refresh of small documents, which
 * a process does under `locks` (held across the processes) after reading the store again.
 */
export interface SharedFetches {
  flights: FlightPeers;
  locks: KeyLocks;
}

/** The message a follower's readers fail with when the leading process stops mid-transfer. */
export const LEADER_STOPPED = 'the worker process fetching it stopped mid-transfer';
