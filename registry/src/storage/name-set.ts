/**
 * A set of names kept in one MetaStore document, so that a request that needs "every project of
 * this index" reads one document instead of listing a prefix (a listing costs one S3 request per
 * 1000 keys and grows with the store). The owner says how to recount the names from its own
 * documents (`recount`, a listing): that runs only when the document is absent (data written by an
 * earlier version, or a store seeded by hand) and when a removal must check that a name is gone.
 *
 *   { names: [...] }     sorted, no duplicates
 *
 * Order of operations, so that the set never misses a name that exists:
 *
 * - A writer calls `add` after the document that makes the name exist has committed. A writer
 *   that dies in between leaves the name out until that name's next write adds it (owners call
 *   `add` on every write, which costs one read when the name is already there).
 * - Building the document from a recount creates it only if still absent (compare-and-swap): a
 *   concurrent `add` either lands first (the build conflicts and reads the document again) or
 *   after (and adds its name to the built set).
 * - `remove` checks that the name is gone inside its compare-and-swap, and once more after it: a
 *   writer that made the name exist again meanwhile may have found it still in the set and
 *   written nothing, but its document committed before that `add` read the set, so before the
 *   removal's own write, and the check after the write sees it and adds the name back. A writer
 *   whose document commits after that check reads the set after the removal and adds the name.
 *
 * The document's store version changes exactly when the set does (S3 ETags follow the content),
 * so it is the cache tag of anything rendered from the names.
 */
import { ConflictError, type MetaStore, type ReadOptions } from './types.js';
import { updateDoc } from './update.js';

interface NameSetDoc {
  names: string[];
}

export interface NameSetView {
  names: string[];
  /** The document's store version: changes whenever `names` does. */
  version: string;
}

export class NameSet {
  constructor(
    private readonly meta: MetaStore,
    /** Where the document lives; outside the folder `recount` lists. */
    readonly key: string,
    /** Every name as the owner's own documents say (a listing): the truth the set mirrors. */
    private readonly recount: () => Promise<string[]>,
  ) {}

  /** The names, from the document; built once from a recount when there is none yet. */
  async read(opts?: ReadOptions): Promise<NameSetView> {
    for (;;) {
      const found = await this.meta.get<NameSetDoc>(this.key, opts);
      if (found) return { names: found.doc.names, version: found.version };
      const names = sortedUnique(await this.recount());
      try {
        return { names, version: await this.meta.put<NameSetDoc>(this.key, { names }, null) };
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        // Another process built or changed it first: read theirs.
      }
    }
  }

  /** Adds `name` (after the document that makes it exist has committed); no write when present. */
  async add(name: string): Promise<void> {
    await updateDoc<NameSetDoc>(this.meta, this.key, async (doc) => {
      if (doc?.names.includes(name)) return undefined;
      const names = doc ? doc.names : await this.recount();
      return { names: sortedUnique([...names, name]) };
    });
  }

  /** Removes `name` if `stillExists` says it is gone (after the document that made it exist went). */
  async remove(name: string, stillExists: () => Promise<boolean>): Promise<void> {
    const { changed } = await updateDoc<NameSetDoc>(this.meta, this.key, async (doc) => {
      // Absent: the next read recounts, which leaves out what is gone.
      if (!doc?.names.includes(name)) return undefined;
      if (await stillExists()) return undefined;
      return { names: doc.names.filter((n) => n !== name) };
    });
    // A writer that brought the name back while this removal ran may have seen it still listed.
    if (changed && (await stillExists())) await this.add(name);
  }
}

function sortedUnique(names: string[]): string[] {
  return [...new Set(names)].sort();
}
