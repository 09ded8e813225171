/**
 * A worker's side of the server-wide flights (`roles/flight-peers.ts`), through the primary's
 * table (`flight-table.ts`). A leader's progress is sent at most every `PROGRESS_EVERY_MS` (the
 * latest size wins), so a large transfer costs the IPC channel a few messages per second per
 * flight, not one per chunk; every other event goes at once, after any progress held back.
 */
import type { FlightPeers, FollowFlight, LeadFlight, PeerEvent } from '../roles/flight-peers.js';
import type { FromWorker, ToWorker } from './messages.js';

const PROGRESS_EVERY_MS = 10;

/** Sends to the primary; false when it cannot be reached any more. */
type Send = (msg: FromWorker) => boolean;

export class WorkerFlights implements FlightPeers {
  readonly #joining = new Map<number, (flight: LeadFlight | FollowFlight) => void>();
  readonly #following = new Map<number, Follower>();
  #nextId = 1;

  constructor(private readonly send: Send) {}

  join(key: string, since?: number): Promise<LeadFlight | FollowFlight> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#joining.set(id, resolve);
      if (this.send({ velodex: 'fly', id, key, ...(since !== undefined ? { since } : {}) })) return;
      // No primary to ask (it is going away): the caller fetches alone.
      this.#joining.delete(id);
      reject(new Error('the primary process cannot be reached'));
    });
  }

  /**
   * The link hands over `flying` and `flight` messages here, synchronously: a follower must exist
   * before the catch-up events that come right behind its `flying` are handled.
   */
  receive(msg: Extract<ToWorker, { velodex: 'flying' | 'flight' }>): void {
    if (msg.velodex === 'flying') {
      const resolve = this.#joining.get(msg.id);
      this.#joining.delete(msg.id);
      if (msg.lead) {
        resolve?.(new Leader(msg.flight, this.send, msg.endedSince === true));
        return;
      }
      const follower = new Follower();
      this.#following.set(msg.flight, follower);
      resolve?.(follower);
      return;
    }
    const follower = this.#following.get(msg.flight);
    if (msg.event.type === 'end') this.#following.delete(msg.flight);
    follower?.push(msg.event);
  }
}

class Leader implements LeadFlight {
  readonly role = 'lead';
  #lastSent = 0;
  #pending: number | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly flight: number,
    private readonly post: Send,
    readonly endedSince: boolean,
  ) {}

  send(event: PeerEvent): void {
    if (event.type === 'progress' && !event.verified) {
      const since = performance.now() - this.#lastSent;
      if (since >= PROGRESS_EVERY_MS && this.#timer === undefined) {
        this.#post(event);
        return;
      }
      this.#pending = event.written;
      this.#timer ??= setTimeout(() => this.#flush(), PROGRESS_EVERY_MS - since).unref();
      return;
    }
    this.#flush();
    this.#post(event);
  }

  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending === undefined) return;
    const written = this.#pending;
    this.#pending = undefined;
    this.#post({ type: 'progress', written });
  }

  #post(event: PeerEvent): void {
    this.#lastSent = performance.now();
    this.post({ velodex: 'flight', flight: this.flight, event });
  }
}

class Follower implements FollowFlight {
  readonly role = 'follow';
  #listener: ((event: PeerEvent) => void) | undefined;
  #early: PeerEvent[] = [];

  listen(listener: (event: PeerEvent) => void): void {
    this.#listener = listener;
    const early = this.#early;
    this.#early = [];
    for (const event of early) listener(event);
  }

  push(event: PeerEvent): void {
    if (this.#listener) this.#listener(event);
    else this.#early.push(event);
  }
}
