/**
 * The cache budgets as the server builds them (lifecycle/budget/): which indexes have one, the
 * record of their downloads, the evictor, and its schedule with what it logs and counts.
 */
import type { Config, IndexConfig } from '../../config/types.js';
import type { FastifyBaseLogger } from 'fastify';
import { Evictor, type BudgetedIndex } from '../../lifecycle/budget/evict.js';
import { RecentUse } from '../../lifecycle/budget/recent-use.js';
import { scheduleEviction } from '../../lifecycle/budget/schedule.js';
import { MetaStoreExclusive } from '../../lifecycle/exclusive.js';
import { indexOfHolder, type HoldsMarker } from '../../lifecycle/marks.js';
import type { UsageLedger } from '../../lifecycle/usage/ledger.js';
import type { UsageCounters } from '../../observe/counters.js';
import type { Stores } from '../../storage/index.js';

export interface Budgets {
  indexes: BudgetedIndex[];
  recentUse: RecentUse;
  evictor: Evictor;
  /** Starts recording and the eviction schedule; returns what stops both. */
  start(counters: UsageCounters, log: FastifyBaseLogger): () => Promise<void>;
}

export function cacheBudgets(config: Pick<Config, 'indexes' | 'gc'>, stores: Stores, usage: UsageLedger, markers: readonly HoldsMarker[]): Budgets {
  const indexes = config.indexes.flatMap((ix): BudgetedIndex[] => (ix.role === 'cached' && ix.budget ? [{ name: ix.name, budget: ix.budget }] : []));
  const recentUse = new RecentUse({ meta: stores.meta, recorded: new Set(indexes.map((ix) => ix.name)) });
  const evictor = new Evictor({ holds: stores.holds, recentUse, usage, indexOf: indexOfHolder(markers) });
  const routeOf = new Map<string, IndexConfig>(config.indexes.map((ix) => [ix.name, ix]));
  return {
    indexes,
    recentUse,
    evictor,
    start(counters, log) {
      recentUse.start();
      const exclusive = new MetaStoreExclusive(stores.meta, { onLost: (name) => log.warn({ lease: name }, 'lease taken over by another process while running') });
      const stop = scheduleEviction(evictor, indexes, exclusive, config.gc.evictEverySecs * 1000, {
        onReport: (report) => {
          if (report.evicted === 0 && report.forgotten === 0) return;
          const ix = routeOf.get(report.index);
          if (ix) {
            counters.index(ix.route).add('evicted', report.evicted);
            counters.index(ix.route).add('evicted_bytes', report.evictedBytes);
          }
          log.info({ event: 'evicted', ...report }, 'evicted least recently downloaded content to keep the cache within its budget');
        },
        onError: (err) => log.warn({ err }, 'eviction failed; the next turn tries again'),
      });
      return async () => {
        stop();
        await recentUse.stop();
      };
    },
  };
}
