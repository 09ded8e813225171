/**
 * The exact count a collection makes on its way (lifecycle/collect.ts): it reads every holds
 * document and lists every stored blob with its size anyway, so per index it sums the distinct
 * digests its holders hold as each document was read, and for the store every held digest once
 * (blobs nobody holds, waiting for a collection, are not counted). A digest two indexes hold
 * counts for both, and once in the total. A digest held only by a holder
 * of no single index (an earlier version's shared holder) counts for each index whose documents
 * reference it (the mark says which).
 *
 * A count takes a while (minutes, paced), and writes go on meanwhile. `CountReads` remembers when
 * each holds document was read and which blobs the listing saw, so that the ledger can add
 * exactly the changes that came after (ledger.ts, `recount`), the collection's own releases too.
 */
import type { Sha256Hex } from '../../storage/types.js';
import type { Marks } from '../marks.js';
import type { UsageFigures } from './ledger.js';

export interface UsageCount {
  indexes: Record<string, UsageFigures>;
  total: UsageFigures;
}

/** When a count read what: the changes made after are added to it (ledger.ts). */
export class CountReads {
  /** When the listing of the holds documents began (epoch ms). */
  holdsListedFrom = 0;
  readonly #readAt = new Map<Sha256Hex, number>();

  /** The holds document of `hex` was read (or found gone) at `at`. */
  read(hex: Sha256Hex, at: number): void {
    this.#readAt.set(hex, at);
  }

  /**
   * Whether a change of `hex`'s holders made at `at` came after the count read the document: it
   * did when the document was read before it, or was never read (created after the listing began).
   */
  holdsChangedAfter(hex: Sha256Hex, at: number): boolean {
    return at > (this.#readAt.get(hex) ?? this.holdsListedFrom);
  }

}

export class UsageCounter {
  readonly #indexes = new Map<string, UsageFigures>();
  #total: UsageFigures = { bytes: 0, objects: 0 };

  constructor(
    private readonly indexOf: (holder: string) => string | null,
    private readonly marks: Marks,
  ) {}

  /** `hex` (`size` bytes, stored) is held by `holders` after the collection. */
  held(hex: Sha256Hex, holders: readonly string[], size: number): void {
    this.#total = { bytes: this.#total.bytes + size, objects: this.#total.objects + 1 };
    const indexes = new Set<string>();
    let shared = false;
    for (const h of holders) {
      const ix = this.indexOf(h);
      if (ix === null) shared = true;
      else indexes.add(ix);
    }
    if (shared) {
      for (const h of this.marks.holdersOf(hex)) {
        const ix = this.indexOf(h);
        if (ix !== null) indexes.add(ix);
      }
    }
    for (const ix of indexes) {
      const cur = this.#indexes.get(ix) ?? { bytes: 0, objects: 0 };
      this.#indexes.set(ix, { bytes: cur.bytes + size, objects: cur.objects + 1 });
    }
  }

  /** The figures: per index, and in all (each digest once). */
  result(): UsageCount {
    return { indexes: Object.fromEntries([...this.#indexes].sort(([a], [b]) => a.localeCompare(b))), total: this.#total };
  }
}
