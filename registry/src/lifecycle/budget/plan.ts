/**
 * Which files and blobs of a cached index eviction lets go of, as a pure function of what was
 * recorded (recent-use.ts): everything not downloaded for `evictUnusedAfter`, then, while the
 * index would still hold more than `maxBytes`, the least recently downloaded first. Only content
 * that was downloaded is recorded, so pages, manifests and metadata are never chosen: they count
 * toward the budget, and an index can stay above it by at most their bytes.
 */
import type { CacheBudget } from '../../config/types.js';
import type { UsedEntry } from './recent-use.js';

export interface EvictionChoice extends UsedEntry {
  why: 'unused' | 'over_budget';
}

export function planEviction(entries: readonly UsedEntry[], heldBytes: number, budget: CacheBudget, nowMs: number): EvictionChoice[] {
  const oldestFirst = [...entries].sort((a, b) => a.lastMs - b.lastMs || a.hex.localeCompare(b.hex));
  const out: EvictionChoice[] = [];
  let held = heldBytes;
  const unusedBefore = budget.evictUnusedAfterSecs === undefined ? -Infinity : nowMs - budget.evictUnusedAfterSecs * 1000;
  for (const e of oldestFirst) {
    if (e.lastMs < unusedBefore) out.push({ ...e, why: 'unused' });
    else if (budget.maxBytes !== undefined && held > budget.maxBytes) out.push({ ...e, why: 'over_budget' });
    else continue;
    held -= e.size;
  }
  return out;
}
