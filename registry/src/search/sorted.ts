/** A sorted array of distinct strings with binary-search insert, remove and prefix ranges. */
export class SortedStrings {
  readonly #items: string[] = [];

  get size(): number {
    return this.#items.length;
  }

  /** The first position whose item is not below `s`. */
  #lowerBound(s: string): number {
    let lo = 0;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#items[mid]! < s) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  add(s: string): void {
    const at = this.#lowerBound(s);
    if (this.#items[at] !== s) this.#items.splice(at, 0, s);
  }

  remove(s: string): void {
    const at = this.#lowerBound(s);
    if (this.#items[at] === s) this.#items.splice(at, 1);
  }

  /** The items that start with `prefix`, in order; `prefix` itself first when present. */
  *withPrefix(prefix: string): Generator<string> {
    for (let i = this.#lowerBound(prefix); i < this.#items.length; i++) {
      const item = this.#items[i]!;
      if (!item.startsWith(prefix)) return;
      yield item;
    }
  }
}
