/**
 * A worker's line to the other workers of its server, through the primary (`primary.ts`): what
 * must be seen whole (the counters of `/+stats`, `/+status` and `/metrics`) is gathered from
 * every worker, and the fs store's per-key locks are held by the primary for all of them.
 *
 * A server of one process has the solo link: the same calls, answered in-process.
 */
import type { WorkerPeers } from '../observe/peers.js';
import type { SharedFetches } from '../roles/flight-peers.js';
import type { KeyLocks } from '../storage/key-locks.js';
import { WorkerKeyLocks } from './key-locks.js';
import { BatchedSender, messagesIn } from './batches.js';
import type { FromWorker, ToWorker } from './messages.js';
import { WorkerFlights } from './worker-flights.js';

export interface WorkerLink extends WorkerPeers {
  /**
   * Waits for the server-wide lock of `key`; resolves to its release, and whether a holder let go
   * of it at or after `since` (`LockGrant`; always true without a `since`).
   */
  lock(key: string, since?: number): Promise<HeldLock>;
  /** Absent in a process that serves alone: its own single-flight is the server's. */
  readonly fetches?: SharedFetches;
}

/** A server-wide lock, held. */
export interface HeldLock {
  release: () => void;
  releasedSince: boolean;
}

type Answer = () => unknown;

/** The link of a process that serves alone. */
export class SoloLink implements WorkerLink {
  readonly workers = 1;
  readonly #answers = new Map<string, Answer>();

  async gather<T>(topic: string): Promise<T[]> {
    const answer = this.#answers.get(topic);
    return answer ? [(await answer()) as T] : [];
  }

  provide(topic: string, answer: Answer): void {
    this.#answers.set(topic, answer);
  }

  /** Nothing else takes it: the store's own in-process lock serialises this process (and knows its releases). */
  lock(): Promise<HeldLock> {
    return Promise.resolve({ release: () => undefined, releasedSince: false });
  }
}

/** The link of a cluster worker: requests go to the primary and come back by id. */
export class ClusterLink implements WorkerLink {
  /** Per-key locks held by the primary for every worker: the fs store's compare-and-swap and shared fetches. */
  readonly locks: KeyLocks = new WorkerKeyLocks(this);
  readonly fetches: SharedFetches;
  readonly #answers = new Map<string, Answer>();
  readonly #waiting = new Map<number, (msg: ToWorker) => void>();
  readonly #flights = new WorkerFlights((msg) => this.#send(msg));
  readonly #outbox = new BatchedSender<FromWorker>((msg) => {
    if (process.connected && process.send) process.send(msg);
  });
  #nextId = 1;

  constructor(readonly workers: number) {
    this.fetches = { flights: this.#flights, locks: this.locks };
    process.on('message', (received: unknown) => {
      for (const msg of messagesIn<ToWorker>(received)) {
        if (msg.velodex === 'ask') void this.#answer(msg.id, msg.topic);
        else if (msg.velodex === 'flying' || msg.velodex === 'flight') this.#flights.receive(msg);
        else this.#waiting.get(msg.id)?.(msg);
      }
    });
  }

  /** False when the primary is gone: there is nobody to tell (the worker is stopping too). */
  #send(msg: FromWorker): boolean {
    if (!process.connected || !process.send) return false;
    this.#outbox.send(msg);
    return true;
  }

  #request(make: (id: number) => FromWorker): Promise<ToWorker> {
    const id = this.#nextId++;
    return new Promise((resolve) => {
      this.#waiting.set(id, (msg) => {
        this.#waiting.delete(id);
        resolve(msg);
      });
      this.#send(make(id));
    });
  }

  async #answer(id: number, topic: string): Promise<void> {
    const answer = this.#answers.get(topic);
    try {
      this.#send({ velodex: 'part', id, part: answer ? await answer() : undefined });
    } catch (err) {
      this.#send({ velodex: 'part', id, error: err instanceof Error ? err.message : String(err) });
    }
  }

  async gather<T>(topic: string): Promise<T[]> {
    const reply = await this.#request((id) => ({ velodex: 'gather', id, topic }));
    return reply.velodex === 'gathered' ? (reply.parts as T[]) : [];
  }

  provide(topic: string, answer: Answer): void {
    this.#answers.set(topic, answer);
  }

  async lock(key: string, since?: number): Promise<HeldLock> {
    let lockId = 0;
    const granted = await this.#request((id) => {
      lockId = id;
      return { velodex: 'lock', id, key, ...(since !== undefined ? { since } : {}) };
    });
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#send({ velodex: 'unlock', id: lockId });
      },
      releasedSince: since === undefined || (granted.velodex === 'locked' && granted.releasedSince === true),
    };
  }

  /** Tells the primary this worker serves `url`. */
  listening(url: string, banner: string[], fields: Record<string, unknown>): void {
    this.#send({ velodex: 'listening', url, banner, fields });
  }
}
