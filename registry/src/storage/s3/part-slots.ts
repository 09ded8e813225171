/**
 * The process-wide cap on multipart parts in flight to the store. Each part is sent from its
 * stage's local copy through a buffer of at most a megabyte (`requests.ts`); without a cap, N
 * concurrent uploads would hold N files, buffers and requests to the store at once (and a
 * commit's final parts on top). With it, a part waits for a slot before it is sent: stages go on
 * writing to their local copies (disk, not memory), and only the uploads to the store queue up.
 * Slots are granted in arrival order and never time out: a part that waits is slowed down, never
 * failed (a stuck store fails the holder's request by its response timeout, which frees the slot).
 */
export class PartSlots {
  #free: number;
  readonly #waiting: Array<() => void> = [];

  constructor(readonly limit: number) {
    this.#free = limit;
  }

  /** Runs `work` once a slot is free, and frees the slot when `work` settles. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.#waiting.shift();
      // The slot passes straight to the next waiter, so a newcomer cannot jump the queue.
      if (next) next();
      else this.#free++;
    }
  }
}
