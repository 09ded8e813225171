/**
 * The primary's table of upstream fetches in flight across its workers (`roles/flight-peers.ts`):
 * the first worker to join a key leads its flight, later ones follow it. The leader's events go to
 * every follower; one that joins late first gets what it missed (the head and the latest
 * progress). A leader that exits ends its flights for the followers with an error, so their
 * clients see a failed transfer, never a stalled one.
 */
import { LEADER_STOPPED, type PeerEvent } from '../roles/flight-peers.js';
import { RecentEnds } from '../storage/recent-ends.js';

interface Flight {
  id: number;
  key: string;
  leader: number;
  followers: Set<number>;
  head: PeerEvent | undefined;
  progress: PeerEvent | undefined;
}

export interface Joined {
  flight: number;
  lead: boolean;
  /** For a follower: the leader's events so far, to send before any new one. */
  catchUp: PeerEvent[];
  /** For a leader: a flight of the key ended at or after the joiner's `since` (`recent-ends.ts`). */
  endedSince?: boolean;
}

/** An event for some workers. */
export interface Forward {
  to: number[];
  flight: number;
  event: PeerEvent;
}

export class FlightTable {
  readonly #byKey = new Map<string, Flight>();
  readonly #byId = new Map<number, Flight>();
  readonly #ended = new RecentEnds();
  #nextId = 1;

  join(key: string, worker: number, since?: number): Joined {
    const running = this.#byKey.get(key);
    if (running && running.leader !== worker) {
      running.followers.add(worker);
      return { flight: running.id, lead: false, catchUp: [running.head, running.progress].filter((e) => e !== undefined) };
    }
    // A worker joins a key again only after its own flight of it ended; a stale entry goes.
    if (running) this.#end(running);
    const flight: Flight = { id: this.#nextId++, key, leader: worker, followers: new Set(), head: undefined, progress: undefined };
    this.#byKey.set(key, flight);
    this.#byId.set(flight.id, flight);
    return { flight: flight.id, lead: true, catchUp: [], ...(since !== undefined && this.#ended.endedSince(key, since) ? { endedSince: true } : {}) };
  }

  /** The leader's `event`: who gets it (nobody when `worker` does not lead `flight`). */
  fromLeader(worker: number, flight: number, event: PeerEvent): Forward | undefined {
    const f = this.#byId.get(flight);
    if (!f || f.leader !== worker) return undefined;
    if (event.type === 'head') f.head = event;
    else if (event.type === 'progress') f.progress = event;
    else this.#end(f);
    return { to: [...f.followers], flight, event };
  }

  /** A worker exited: the flights it led end in error for their followers; it follows nothing. */
  dropWorker(worker: number): Forward[] {
    const out: Forward[] = [];
    for (const f of [...this.#byId.values()]) {
      f.followers.delete(worker);
      if (f.leader !== worker) continue;
      this.#end(f);
      out.push({ to: [...f.followers], flight: f.id, event: { type: 'end', end: { kind: 'upstream_error', message: LEADER_STOPPED } } });
    }
    return out;
  }

  /** Flights running (for tests). */
  get size(): number {
    return this.#byId.size;
  }

  #end(f: Flight): void {
    this.#ended.ended(f.key);
    this.#byId.delete(f.id);
    if (this.#byKey.get(f.key) === f) this.#byKey.delete(f.key);
  }
}
