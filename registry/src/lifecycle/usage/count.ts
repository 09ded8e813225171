/**
 * The exact count a collection makes on its way (lifecycle/collect.ts): it reads every holds
 * document and lists every stored blob with its size anyway, so per index it sums the distinct
 * digests its holders still hold once the collection has judged them, and for the store the
 * blobs left. A digest two indexes hold counts for both, and once in the total. A digest held
 * only by a holder of no single index (an earlier version's shared holder) counts for each index
 * whose documents reference it (the mark says which).
 */
import type { Sha256Hex } from '../../storage/types.js';
import type { Marks } from '../marks.js';
import type { UsageFigures } from './ledger.js';

export interface UsageCount {
  indexes: Record<string, UsageFigures>;
  total: UsageFigures;
}

export class UsageCounter {
  readonly #indexes = new Map<string, UsageFigures>();

  constructor(
    private readonly indexOf: (holder: string) => string | null,
    private readonly marks: Marks,
  ) {}

  /** `hex` (`size` bytes, stored) is held by `holders` after the collection. */
  held(hex: Sha256Hex, holders: readonly string[], size: number): void {
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

  /** The figures, with the store's total from the blobs left after the collection. */
  result(total: UsageFigures): UsageCount {
    return { indexes: Object.fromEntries([...this.#indexes].sort(([a], [b]) => a.localeCompare(b))), total };
  }
}
