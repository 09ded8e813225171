/**
 * Keeps cached indexes within their budgets (`max_bytes`, `evict_unused_after`): for each such
 * index, the choice of plan.ts, carried out by letting go of the index's holds on those digests.
 * With the last holder the bytes go (storage/holds.ts); bytes another index holds stay, and only
 * this index's figure drops. Hosted content is never touched: only cached indexes have budgets,
 * and only their own holders are released. The index's documents (a page listing the file, a
 * manifest naming the blob) stay: the next request for evicted content finds it missing and
 * fetches it again from the upstream, exactly as a cold miss.
 *
 * Each release is a compare-and-swap on the holds document as read (`releaseJudged`): a hold
 * taken meanwhile (the content fetched again) wins, and nothing is released. Runs under a lease
 * (one evicting process at a time); a run's figures are the usage ledger's.
 */
import type { CacheBudget } from '../../config/types.js';
import type { BlobHolds } from '../../storage/holds.js';
import type { Sha256Hex } from '../../storage/types.js';
import type { UsageFigures } from '../usage/ledger.js';
import { planEviction } from './plan.js';
import type { RecentUse } from './recent-use.js';

export interface BudgetedIndex {
  name: string;
  budget: CacheBudget;
}

export interface EvictionReport {
  index: string;
  /** Files and blobs whose hold the index let go, and their bytes. */
  evicted: number;
  evictedBytes: number;
  /** Recorded digests the index no longer held (released otherwise): forgotten. */
  forgotten: number;
}

export interface EvictorOptions {
  holds: BlobHolds;
  recentUse: RecentUse;
  usage: { usage(index: string): UsageFigures; flush(): Promise<void> };
  /** The index a holder belongs to (the markers'). */
  indexOf: (holder: string) => string | null;
  now?: () => number;
}

export class Evictor {
  constructor(private readonly o: EvictorOptions) {}

  /** One pass over `index`: what it evicted. */
  async evict(index: BudgetedIndex): Promise<EvictionReport> {
    const { holds, recentUse, usage } = this.o;
    await Promise.all([recentUse.flush(), usage.flush()]);
    const report: EvictionReport = { index: index.name, evicted: 0, evictedBytes: 0, forgotten: 0 };
    const chosen = planEviction(await recentUse.entries(index.name), usage.usage(index.name).bytes, index.budget, (this.o.now ?? Date.now)());
    const forget: Sha256Hex[] = [];
    for (const choice of chosen) {
      const entry = await holds.entry(choice.hex);
      const own = entry && entry.doc.releasing === undefined ? entry.doc.holders.filter((h) => this.o.indexOf(h) === index.name) : [];
      if (!entry || own.length === 0) {
        report.forgotten += 1;
        forget.push(choice.hex);
        continue;
      }
      const done = await holds.releaseJudged(entry, own);
      if (!done.released) continue;
      report.evicted += 1;
      report.evictedBytes += choice.size;
      forget.push(choice.hex);
    }
    if (forget.length > 0) await recentUse.forget(index.name, forget);
    return report;
  }
}
