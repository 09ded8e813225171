/**
 * The cap on connections one client address holds open at once (`[connections] max_per_client`):
 * a count per address of the connections this process has accepted and not yet seen close. An
 * address at the cap gets no more until one of its connections closes.
 *
 * Per process, like the rate limiter: with several worker processes each counts the connections
 * it was handed, so a client may hold up to workers × cap. Sharing the count would put a round
 * trip to the primary on every accepted connection (docs/operations.md, "Slow clients").
 *
 * Memory is bounded by the open connections themselves: an address leaves the table when its
 * last connection closes.
 */
export class ConnectionCap {
  readonly #open = new Map<string, number>();

  constructor(readonly limit: number) {}

  /** Counts a new connection of `address`; false (and not counted) when the address is at the cap. */
  take(address: string): boolean {
    const held = this.#open.get(address) ?? 0;
    if (held >= this.limit) return false;
    this.#open.set(address, held + 1);
    return true;
  }

  /** A counted connection of `address` closed. */
  release(address: string): void {
    const held = this.#open.get(address) ?? 0;
    if (held <= 1) this.#open.delete(address);
    else this.#open.set(address, held - 1);
  }

  /** The connections `address` holds now. */
  held(address: string): number {
    return this.#open.get(address) ?? 0;
  }
}
