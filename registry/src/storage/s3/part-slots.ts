/**
 * The process-wide cap on multipart parts in memory. Each part in flight is read from a stage's
 * local copy into a buffer of its own; without a cap, N concurrent uploads would hold N of them
 * (and a commit's final parts on top). With it, a part waits for a slot before it is read:
 * stages go on writing to their local copies (disk, not memory), and only the uploads to the
 * store queue up. Slots are granted in arrival order and never time out: a part that waits is
 * slowed down, never failed (a stuck store fails the holder's request by its response timeout,
 * which frees the slot).
 *
 * Each slot owns one part-sized buffer, allocated on first use and reused for every later part:
 * the memory for parts is `limit x size` at most, and a busy process does not churn through
 * large buffers that the garbage collector frees only later (which showed as tens of MiB of
 * extra RSS under many concurrent uploads).
 */
export class PartSlots {
  readonly #free: number[] = [];
  readonly #buffers: Buffer[] = [];
  readonly #waiting: Array<(slot: number) => void> = [];

  constructor(
    readonly limit: number,
    readonly bufferSize: number,
  ) {
    for (let i = limit - 1; i >= 0; i--) this.#free.push(i);
  }

  /**
   * Runs `work` once a slot is free, with the slot's buffer (`bufferSize` bytes; use a prefix of
   * it), and frees the slot when `work` settles. The buffer must not be used after that.
   */
  async run<T>(work: (buffer: Buffer) => Promise<T>): Promise<T> {
    const slot = this.#free.pop() ?? (await new Promise<number>((resolve) => this.#waiting.push(resolve)));
    try {
      return await work((this.#buffers[slot] ??= Buffer.allocUnsafe(this.bufferSize)));
    } finally {
      const next = this.#waiting.shift();
      // The slot passes straight to the next waiter, so a newcomer cannot jump the queue.
      if (next) next(slot);
      else this.#free.push(slot);
    }
  }

  /** Slots in use now. */
  get inUse(): number {
    return this.limit - this.#free.length;
  }
}
