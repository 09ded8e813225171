/**
 * The mark of a collection: which digests the documents of each ecosystem reference, per holder.
 * Each ecosystem tells the collector through its `HoldsMarker` (ecosystem/ecosystem.ts,
 * `EcosystemModule.holdsMarker`) which holder names are its own and what they reference; the
 * collector names no ecosystem. A hold whose holder no marker owns is never released: it may be
 * an index this process's config does not have (yet), or a later version's.
 */
import type { IndexConfig } from '../config/types.js';
import type { BlobStore, MetaStore, Sha256Hex } from '../storage/types.js';

/** The referenced digests per holder name, as the markers report them. */
export class Marks {
  readonly #byHolder = new Map<string, Set<Sha256Hex>>();

  /** `holder`'s documents reference `hex` (64 lowercase hex characters; anything else is ignored). */
  add(holder: string, hex: string): void {
    if (!/^[0-9a-f]{64}$/.test(hex)) return;
    let set = this.#byHolder.get(holder);
    if (!set) this.#byHolder.set(holder, (set = new Set()));
    set.add(hex);
  }

  has(holder: string, hex: Sha256Hex): boolean {
    return this.#byHolder.get(holder)?.has(hex) ?? false;
  }

  /** The holders whose documents reference `hex` (one pass over the holders: for the rare digest that needs it). */
  holdersOf(hex: Sha256Hex): string[] {
    const out: string[] = [];
    for (const [holder, set] of this.#byHolder) if (set.has(hex)) out.push(holder);
    return out;
  }

  /** Referenced digests over every holder, each counted once. */
  get size(): number {
    const all = new Set<Sha256Hex>();
    for (const set of this.#byHolder.values()) for (const hex of set) all.add(hex);
    return all.size;
  }
}

/** What a marker may read: the stores and the indexes of the config. */
export interface MarkServices {
  meta: MetaStore;
  blobs: BlobStore;
  indexes: readonly IndexConfig[];
}

/**
 * One ecosystem's part of the mark. `mark` must be complete for every holder `owns` accepts: a
 * digest it leaves out is released once its hold is older than the grace period, and with the
 * last holder its bytes are deleted. When in doubt, a marker adds (keeping too much costs bytes,
 * leaving out costs served content).
 */
export interface HoldsMarker {
  /** Whether `holder` is one of this ecosystem's holder names that `mark` accounts for. */
  owns(holder: string): boolean;
  /** Adds, for every holder it owns, each digest its stored documents reference now. */
  mark(marks: Marks): Promise<void>;
  /**
   * The index a holder it owns belongs to, for accounting (lifecycle/usage/); null for a holder
   * shared by several indexes (an earlier version's), whose digests count for the indexes whose
   * documents reference them.
   */
  indexOf(holder: string): string | null;
}

/** The index a holder is of, by the markers (null: no single index, or no marker owns it). */
export function indexOfHolder(markers: readonly HoldsMarker[]): (holder: string) => string | null {
  return (holder) => markers.find((m) => m.owns(holder))?.indexOf(holder) ?? null;
}

const HEX = /^(?:sha256:)?([0-9a-f]{64})$/;

/**
 * Every sha256 a JSON document names: each string value that is 64 lowercase hex characters or
 * `sha256:` and those, at any depth, and with `keys` the object keys of that shape too. Markers
 * read their documents through it, so a field a later version adds is not missed; a string that
 * merely looks like a digest keeps at most some bytes longer.
 */
export function digestsIn(value: unknown, { keys = false }: { keys?: boolean } = {}): Sha256Hex[] {
  const out = new Set<Sha256Hex>();
  const walk = (v: unknown): void => {
    if (typeof v === 'string') {
      const hex = HEX.exec(v)?.[1];
      if (hex) out.add(hex);
    } else if (Array.isArray(v)) {
      v.forEach(walk);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (keys) walk(k);
        walk(child);
      }
    }
  };
  walk(value);
  return [...out];
}
