/**
 * The background sender: keeps the due time of every pending delivery, wakes when the earliest
 * is due, and runs a bounded number of attempts at once. It holds no delivery data itself: the
 * outbox document is read (and claimed) at each attempt, so a restart only needs the list of ids
 * and times, and on a shared store every process may keep the same id: the claim decides who sends.
 */
import type { AttemptDeps } from './attempt.js';
import { attemptDelivery } from './attempt.js';

const MAX_IN_FLIGHT = 8;
/** setTimeout's largest delay; a later due time simply re-arms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class Dispatcher {
  readonly #due = new Map<string, number>();
  readonly #inFlight = new Map<string, Promise<void>>();
  readonly #stop = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  #running = false;

  constructor(private readonly deps: Omit<AttemptDeps, 'stop'>) {}

  schedule(id: string, at: number): void {
    if (this.#stop.signal.aborted) return;
    this.#due.set(id, at);
    this.#arm();
  }

  /** Whether `id` is waiting or being attempted here. */
  knows(id: string): boolean {
    return this.#due.has(id) || this.#inFlight.has(id);
  }

  run(): void {
    this.#running = true;
    this.#arm();
  }

  /** Stops sending; an attempt in flight is abandoned and its document kept for the next start. */
  async close(): Promise<void> {
    this.#stop.abort();
    clearTimeout(this.#timer);
    await Promise.allSettled(this.#inFlight.values());
  }

  #arm(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.#running || this.#stop.signal.aborted || this.#inFlight.size >= MAX_IN_FLIGHT) return;
    let earliest = Infinity;
    for (const [id, at] of this.#due) if (!this.#inFlight.has(id) && at < earliest) earliest = at;
    if (earliest === Infinity) return;
    this.#timer = setTimeout(() => this.#tick(), Math.min(Math.max(earliest - Date.now(), 0), MAX_TIMER_MS));
  }

  #tick(): void {
    const now = Date.now();
    const ready = [...this.#due].filter(([id, at]) => at <= now && !this.#inFlight.has(id)).sort((a, b) => a[1] - b[1]);
    for (const [id] of ready) {
      if (this.#inFlight.size >= MAX_IN_FLIGHT) break;
      this.#start(id);
    }
    this.#arm();
  }

  #start(id: string): void {
    this.#due.delete(id);
    const done = attemptDelivery(id, { ...this.deps, stop: this.#stop.signal })
      .then((next) => {
        if (next !== undefined && !this.#stop.signal.aborted) this.#due.set(id, next);
      })
      .catch((err: unknown) => {
        // A storage failure: keep the id and try again later rather than lose the delivery.
        this.deps.log.error({ delivery: id, error: err instanceof Error ? err.message : 'unknown error' }, 'webhook outbox error');
        if (!this.#stop.signal.aborted) this.#due.set(id, Date.now() + 30_000);
      })
      .finally(() => {
        this.#inFlight.delete(id);
        this.#arm();
      });
    this.#inFlight.set(id, done);
  }
}
