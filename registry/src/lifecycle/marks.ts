/**
 * The mark of a collection: which digests the documents of each ecosystem reference, per holder.
 * Each ecosystem tells the collector through its `HoldsMarker` (ecosystem/ecosystem.ts,
 * `EcosystemModule.holdsMarker`) which holder names are its own and what they reference; the
 * collector names no ecosystem. A hold whose holder no marker owns is never released: it may be
 * an index this process's config does not have (yet), or a later version's.
 */
import type { IndexConfig } from '../config/types.js';
import type { BlobStore, MetaStore, Sha256Hex } from '../storage/types.js';

/**
 * The referenced digests and, for each, the holders whose documents reference it, as the
 * markers report them. Kept by digest (one small set of holder names each, the names shared),
 * so "does this holder's mark name it" and "which holders' marks name it" are one lookup each:
 * the mark may hold 100k digests, and accounting asks per digest.
 */
export class Marks {
  /**
   * Called by markers between batches of work: keeps the collection to its CPU share
   * (pace.ts). A no-op unless the collection sets it.
   */
  pace: () => Promise<void> = async () => undefined;

  readonly #byHex = new Map<Sha256Hex, Set<string>>();
  /** One string per holder name, so 100k sets share a few names instead of copying them. */
  readonly #names = new Map<string, string>();

  /** `holder`'s documents reference `hex` (64 lowercase hex characters; anything else is ignored). */
  add(holder: string, hex: string): void {
    if (!/^[0-9a-f]{64}$/.test(hex)) return;
    let name = this.#names.get(holder);
    if (name === undefined) this.#names.set(holder, (name = holder));
    let set = this.#byHex.get(hex);
    if (!set) this.#byHex.set(hex, (set = new Set()));
    set.add(name);
  }

  has(holder: string, hex: Sha256Hex): boolean {
    return this.#byHex.get(hex)?.has(holder) ?? false;
  }

  /** The holders whose documents reference `hex` (empty when none does). */
  holdersOf(hex: Sha256Hex): ReadonlySet<string> {
    return this.#byHex.get(hex) ?? NONE;
  }

  /** Referenced digests over every holder, each counted once. */
  get size(): number {
    return this.#byHex.size;
  }
}

const NONE: ReadonlySet<string> = new Set();

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
  /**
   * The index `holder` belongs to, by name (read from the name alone: the caller matches it
   * against its config): what an index holds is what its holders hold (accounting, quotas).
   * Null for a holder several indexes share (an earlier version's ecosystem-wide holder), whose
   * digests belong to the indexes whose documents reference them (`Marks.holdersOf`), and for a
   * name that is not one of this ecosystem's holders.
   */
  indexOf(holder: string): string | null;
  /** Adds, for every holder it owns, each digest its stored documents reference now. */
  mark(marks: Marks): Promise<void>;
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
