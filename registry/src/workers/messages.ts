/**
 * What a server's primary and its workers tell each other over the cluster IPC channel. Every
 * message carries `velodex` (its kind), which tells ours apart from what other modules send on
 * the same channel (prom-client's cluster module listens there too).
 */
import type { PeerEvent } from '../roles/flight-peers.js';

/** A worker to its primary. */
export type FromWorker =
  /** Listening: the url, and the start-up lines and log fields the primary prints once for all. */
  | { velodex: 'listening'; url: string; banner: string[]; fields: Record<string, unknown> }
  /** Every worker's answer to `topic` (`WorkerLink.gather`). */
  | { velodex: 'gather'; id: number; topic: string }
  /** This worker's answer to an `ask`. */
  | { velodex: 'part'; id: number; part?: unknown; error?: string }
  /** Take the lock of `key`; `locked` with the same id grants it. `since`: see `LockGrant`. */
  | { velodex: 'lock'; id: number; key: string; since?: number }
  | { velodex: 'unlock'; id: number }
  /**
   * Join the server-wide flight of `key` (`flight-table.ts`); `flying` with the same id answers.
   * `since`: when the worker's lookup of the store began (`FlightPeers.join`).
   */
  | { velodex: 'fly'; id: number; key: string; since?: number }
  /** The leader of `flight` tells its followers. */
  | { velodex: 'flight'; flight: number; event: PeerEvent };

/** The primary to one worker. */
export type ToWorker =
  | { velodex: 'gathered'; id: number; parts: unknown[] }
  | { velodex: 'ask'; id: number; topic: string }
  /** `releasedSince`: a holder let go of the lock at or after the `since` of `lock` (`LockGrant`). */
  | { velodex: 'locked'; id: number; releasedSince?: boolean }
  /**
   * This worker leads `flight`, or follows it (the leader's events so far come next, as `flight`).
   * `endedSince`: a flight of the key ended at or after the `since` of `fly`.
   */
  | { velodex: 'flying'; id: number; flight: number; lead: boolean; endedSince?: boolean }
  /** What the leader of `flight` told its followers. */
  | { velodex: 'flight'; flight: number; event: PeerEvent };

export function isOurs<T extends { velodex: string }>(msg: unknown): msg is T {
  return typeof msg === 'object' && msg !== null && typeof (msg as { velodex?: unknown }).velodex === 'string';
}
