/**
 * `[gc]`: the online garbage collection of blobs (lifecycle/, docs/storage-lifecycle.md): whether
 * every process runs it on a schedule, how often, how old an unreferenced hold or an unheld blob
 * must be before it goes, how long a collector's lease lasts without renewal, and how often cached
 * indexes with a budget are brought within it.
 */
import { parseDuration } from './duration.js';
import { ConfigError } from './errors.js';
import type { FileConfig } from './schema.js';

export interface GcConfig {
  /** Collections on a schedule, in every process (the lease lets one run at a time). */
  enabled: boolean;
  everySecs: number;
  /** Holds and blobs younger than this are never collected: longer than any push takes. */
  graceSecs: number;
  /** A running collection renews its lease every third of this; a killed one blocks the next this long. */
  leaseSecs: number;
  /** How often cached indexes with a budget (`max_bytes`, `evict_unused_after`) are brought within it. */
  evictEverySecs: number;
  /** The share of one core a collection may use; it pauses to keep to it (lifecycle/pace.ts). */
  cpuShare: number;
}

export const DEFAULT_GC_EVERY_SECS = 6 * 3600;
export const DEFAULT_GC_GRACE_SECS = 24 * 3600;
export const DEFAULT_GC_LEASE_SECS = 60;
export const DEFAULT_EVICT_EVERY_SECS = 60;
/** A tenth of a core: pushes beside a collection keep their speed; a collection of 100k blobs takes minutes. */
export const DEFAULT_GC_CPU_SHARE = 0.1;

export function resolveGc(table: FileConfig['gc']): GcConfig {
  const t = table ?? {};
  const secs = (key: 'every' | 'grace' | 'lease' | 'evict_every', fallback: number, min: number): number => {
    const value = t[key];
    if (value === undefined) return fallback;
    const parsed = parseDuration(value);
    if (parsed === null || parsed < min) {
      throw new ConfigError(`gc.${key}`, `must be a duration of at least ${min}s`, 'write seconds, or a duration like "90s", "30m", "6h", "1d"');
    }
    return parsed;
  };
  return {
    enabled: t.enabled ?? true,
    everySecs: secs('every', DEFAULT_GC_EVERY_SECS, 1),
    graceSecs: secs('grace', DEFAULT_GC_GRACE_SECS, 0),
    leaseSecs: secs('lease', DEFAULT_GC_LEASE_SECS, 1),
    evictEverySecs: secs('evict_every', DEFAULT_EVICT_EVERY_SECS, 1),
    cpuShare: t.cpu_share ?? DEFAULT_GC_CPU_SHARE,
  };
}
