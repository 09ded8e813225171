/**
 * Eviction on a schedule (`[gc] evict_every`, a minute by default): every process keeps it, and
 * the `evict` lease lets one of them at a time bring every cached index with a budget within it.
 * Timers are unref'd.
 */
import type { Exclusive } from '../exclusive.js';
import type { BudgetedIndex, EvictionReport, Evictor } from './evict.js';

export interface EvictionHooks {
  onReport(report: EvictionReport): void;
  onError(err: unknown): void;
}

/** Starts the turns; the returned function stops them (a pass under way finishes). */
export function scheduleEviction(evictor: Evictor, indexes: readonly BudgetedIndex[], exclusive: Exclusive, everyMs: number, hooks: EvictionHooks): () => void {
  if (indexes.length === 0) return () => undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const pass = async (): Promise<void> => {
    await exclusive.runExclusive('evict', async () => {
      for (const index of indexes) {
        if (stopped) return;
        hooks.onReport(await evictor.evict(index));
      }
    });
  };
  const arm = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      pass()
        .catch((err: unknown) => hooks.onError(err))
        .finally(arm);
    }, everyMs);
    timer.unref();
  };
  arm();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
