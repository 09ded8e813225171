/** Concurrent calls for one key share one promise (single-flight for results held in memory). */
export class PromiseFlights<T> {
  readonly #running = new Map<string, Promise<T>>();

  run(key: string, fn: () => Promise<T>): Promise<T> {
    const running = this.#running.get(key);
    if (running) return running;
    const p = fn().finally(() => {
      if (this.#running.get(key) === p) this.#running.delete(key);
    });
    this.#running.set(key, p);
    return p;
  }

  get size(): number {
    return this.#running.size;
  }
}
