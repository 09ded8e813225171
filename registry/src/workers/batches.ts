/**
 * The IPC channel between the primary and a worker carries one write per `send`, and every write
 * wakes the process at the other end. A cold pull makes dozens of exchanges at once (a lock and
 * its release per document written, a join per fetch), so the messages one side sends within one
 * turn of its event loop go together: queued, and sent as one `batch` once the turn's synchronous
 * work and promise callbacks are done (`process.nextTick`), so no message waits for I/O.
 * Order is kept, and a lone message goes as it is.
 */
import { isOurs } from './messages.js';

export interface Batch<T> {
  velodex: 'batch';
  messages: T[];
}

export class BatchedSender<T extends { velodex: string }> {
  #queue: T[] = [];

  /** `deliver` writes one message (a lone one or a batch) to the channel. */
  constructor(private readonly deliver: (msg: T | Batch<T>) => void) {}

  send(msg: T): void {
    this.#queue.push(msg);
    if (this.#queue.length === 1) process.nextTick(() => this.#flush());
  }

  #flush(): void {
    const queue = this.#queue;
    this.#queue = [];
    this.deliver(queue.length === 1 ? queue[0]! : { velodex: 'batch', messages: queue });
  }
}

/** Every message of ours that `msg` carries, in order: none, itself, or a batch's. */
export function messagesIn<T extends { velodex: string }>(msg: unknown): T[] {
  if (!isOurs<T | Batch<T>>(msg)) return [];
  if (msg.velodex !== 'batch') return [msg as T];
  return (msg as Batch<T>).messages.filter((m): m is T => isOurs<T>(m));
}
