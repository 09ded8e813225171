/**
 * When each file or blob of a cached index with a budget was last downloaded: what eviction
 * (evict.ts) orders by. Kept without a store write per download: a download only updates this
 * process's memory, and every `flushMs` (30 s) the times are merged into the store, one
 * document per index and digest prefix,
 *
 *   lifecycle/budgets/<index>/<ab>   { used: { <hex>: [size, lastDownloadedMs] } }
 *
 * by compare-and-swap (the later time wins), so every process's downloads count. A time is
 * therefore at most one flush interval stale when an eviction reads it (a process killed before
 * its flush loses at most that interval of times: those files look older than they are).
 * Only indexes with a budget are recorded; for the others a download costs nothing here.
 */
import type { IndexConfig } from '../../config/types.js';
import type { MetaStore, Sha256Hex } from '../../storage/types.js';
import { updateDoc } from '../../storage/update.js';
import { PeriodicFlush } from '../periodic-flush.js';

export interface UsedDoc {
  /** Per digest: its size in bytes and when it was last downloaded (epoch ms). */
  used: Record<string, [number, number]>;
}

export interface UsedEntry {
  hex: Sha256Hex;
  size: number;
  lastMs: number;
}

const FOLDER = 'lifecycle/budgets';
const DEFAULT_FLUSH_MS = 30_000;
/** Digests remembered between flushes; past it the memory is flushed early. */
const MAX_PENDING = 50_000;

export interface RecentUseOptions {
  meta: MetaStore;
  /** The indexes whose downloads are recorded (cached indexes with a budget), by name. */
  recorded: ReadonlySet<string>;
  flushMs?: number;
  now?: () => number;
}

export class RecentUse {
  readonly #o: RecentUseOptions;
  /** index -> hex -> [size, lastMs] not yet in the store. */
  readonly #pending = new Map<string, Map<Sha256Hex, [number, number]>>();
  #count = 0;
  readonly #flush: PeriodicFlush;

  constructor(opts: RecentUseOptions) {
    this.#o = opts;
    this.#flush = new PeriodicFlush(() => this.#flushOnce(), opts.flushMs ?? DEFAULT_FLUSH_MS);
  }

  /** Whether downloads of `index` are recorded (it has a budget). */
  records(index: string): boolean {
    return this.#o.recorded.has(index);
  }

  /**
   * `hex` (`size` bytes; 0 when unknown) was downloaded through `index` just now: for the cached
   * index that holds it, the index itself or, through a virtual index, its members (only those
   * with a budget record it).
   */
  downloaded(index: Pick<IndexConfig, 'name'> & ({ role: 'virtual'; members: readonly string[] } | { role: 'hosted' | 'cached' }), hex: Sha256Hex, size: number): void {
    const at = (this.#o.now ?? Date.now)();
    for (const name of index.role === 'virtual' ? index.members : [index.name]) {
      if (this.#o.recorded.has(name)) this.#remember(name, hex, size, at);
    }
    if (this.#count >= MAX_PENDING) void this.flush().catch(() => undefined);
  }

  #remember(index: string, hex: Sha256Hex, size: number, lastMs: number): void {
    let map = this.#pending.get(index);
    if (!map) this.#pending.set(index, (map = new Map()));
    const had = map.get(hex);
    if (!had) this.#count += 1;
    map.set(hex, [Math.max(size, had?.[0] ?? 0), Math.max(lastMs, had?.[1] ?? 0)]);
  }

  start(): void {
    if (this.#o.recorded.size > 0) this.#flush.start();
  }

  stop(): Promise<void> {
    return this.#flush.stop();
  }

  /** Merges what this process recorded into the store. One at a time. */
  flush(): Promise<void> {
    return this.#flush.run();
  }

  /** Every recorded digest of `index`, from the store. */
  async entries(index: string): Promise<UsedEntry[]> {
    const out: UsedEntry[] = [];
    for await (const key of this.#o.meta.list(`${FOLDER}/${index}`)) {
      const doc = (await this.#o.meta.get<UsedDoc>(key))?.doc;
      for (const [hex, [size, lastMs]] of Object.entries(doc?.used ?? {})) out.push({ hex, size, lastMs });
    }
    return out;
  }

  /** Forgets digests of `index` (evicted, or no longer held by it). */
  async forget(index: string, hexes: readonly Sha256Hex[]): Promise<void> {
    for (const [shard, group] of byShard(hexes)) {
      await updateDoc<UsedDoc>(this.#o.meta, keyOf(index, shard), (doc) => {
        if (!doc) return undefined;
        for (const hex of group) delete doc.used[hex];
        return doc;
      });
    }
  }

  async #flushOnce(): Promise<void> {
    const taken = [...this.#pending];
    this.#pending.clear();
    this.#count = 0;
    for (const [index, map] of taken) {
      for (const [shard, group] of byShard([...map.keys()])) {
        try {
          await updateDoc<UsedDoc>(this.#o.meta, keyOf(index, shard), (doc) => {
            const used = { ...doc?.used };
            for (const hex of group) {
              const [size, lastMs] = map.get(hex)!;
              const had = used[hex];
              used[hex] = [Math.max(size, had?.[0] ?? 0), Math.max(lastMs, had?.[1] ?? 0)];
            }
            return { used };
          });
        } catch (err) {
          // Kept for the next flush (later downloads of the same digest win).
          for (const hex of group) this.#remember(index, hex, ...map.get(hex)!);
          throw err;
        }
      }
    }
  }
}

function keyOf(index: string, shard: string): string {
  return `${FOLDER}/${index}/${shard}`;
}

function byShard(hexes: readonly Sha256Hex[]): Map<string, Sha256Hex[]> {
  const out = new Map<string, Sha256Hex[]>();
  for (const hex of hexes) {
    const shard = hex.slice(0, 2);
    let group = out.get(shard);
    if (!group) out.set(shard, (group = []));
    group.push(hex);
  }
  return out;
}
