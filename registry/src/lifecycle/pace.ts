/**
 * Keeps a collection to a share of the CPU, so that pushes and pulls on the same machine go on at
 * full speed beside it (`[gc] cpu_share`). The collector calls `step()` between units of work;
 * once the process has used `SLICE_MS` of CPU since the last pause, `step` sleeps long enough for
 * that CPU time to be `share` of the time passed. The process's CPU counts, not the collector's
 * alone: in a server that is busy serving, the collection yields more, and goes at its share when
 * the server is idle. Every concurrent worker of a collection waits for the same pause.
 */

/** CPU used between pauses before the next pause (ms). */
const SLICE_MS = 20;
/** The longest single pause (ms): a collection under a busy server still moves. */
const MAX_PAUSE_MS = 2_000;

export class Pacer {
  #sliceStart: number;
  #pause: Promise<void> | null = null;

  constructor(
    /** The share of one core the work may use, 0 < share ≤ 1 (1: never pauses). */
    private readonly share: number,
    /** CPU time used by the process so far, in ms. */
    private readonly cpuMs: () => number = processCpuMs,
  ) {
    this.#sliceStart = cpuMs();
  }

  async step(): Promise<void> {
    if (this.share >= 1) return;
    if (this.#pause) return this.#pause;
    const used = this.cpuMs() - this.#sliceStart;
    if (used < SLICE_MS) return;
    const waitMs = Math.min(MAX_PAUSE_MS, used * (1 / this.share - 1));
    this.#pause = new Promise<void>((resolve) => setTimeout(resolve, waitMs)).then(() => {
      this.#sliceStart = this.cpuMs();
      this.#pause = null;
    });
    return this.#pause;
  }
}

function processCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
