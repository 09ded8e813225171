/**
 * What the usage ledger and the download record share: a flush to the store that runs every
 * interval (its timer unref'd: it never keeps a process alive), one at a time (a flush asked for
 * while one runs gets that one), and once more on stop. A failed timed flush is left for the
 * next one: what it did not write stays in memory.
 */
export class PeriodicFlush {
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;

  constructor(
    private readonly flushOnce: () => Promise<void>,
    private readonly everyMs: number,
  ) {}

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.run().catch(() => undefined), this.everyMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.run().catch(() => undefined);
  }

  run(): Promise<void> {
    this.#running ??= this.flushOnce().finally(() => (this.#running = null));
    return this.#running;
  }
}
