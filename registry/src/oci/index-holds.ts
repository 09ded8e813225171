/**
 * Which OCI index holds which blob. Every hosted OCI index is a holder of its own among the shared
 * blob store's holds (storage/holds.ts), beside Python's, so:
 *
 * - /v2 under an index sees a blob only when that index, or for a virtual index one of its
 *   members, holds it: bytes pushed through team A's index are not served through team B's;
 * - a DELETE releases the hold of the index that receives the write, and the bytes go only when
 *   no holder is left (another index, or a Python file with the same bytes);
 * - a mount adds the target index's hold; `uploads.ts` decides when that is allowed.
 *
 * Holder names are `oci.<index name>`: index names are `[A-Za-z0-9][A-Za-z0-9._-]*` (config
 * schema), so every name is a valid holder name and none can be another ecosystem's. A hold left
 * by an earlier version under the plain name `oci` belongs to no index: /v2 ignores it.
 */
import type { IndexConfig } from '../config/types.js';
import { membersOf } from '../roles/write-target.js';
import type { BlobHolds, Holder } from '../storage/holds.js';
import type { Sha256Hex } from '../storage/types.js';

export function holderName(indexName: string): string {
  return `oci.${indexName}`;
}

export class IndexHolds {
  readonly #byIndex = new Map<string, Holder>();

  constructor(
    private readonly holds: BlobHolds,
    private readonly indexByName: ReadonlyMap<string, IndexConfig>,
  ) {}

  /** The holder of hosted index `indexName`: what a write to it holds and releases with. */
  of(indexName: string): Holder {
    let holder = this.#byIndex.get(indexName);
    if (!holder) {
      holder = this.holds.as(holderName(indexName));
      this.#byIndex.set(indexName, holder);
    }
    return holder;
  }

  /** Whether /v2 under `index` may see `hex`: the index or one of its OCI members holds it. One read. */
  async visible(index: IndexConfig, hex: Sha256Hex): Promise<boolean> {
    const holders = await this.holds.holders(hex);
    if (holders.length === 0) return false;
    return membersOf(index, this.indexByName).some((m) => m.ecosystem === 'oci' && holders.includes(holderName(m.name)));
  }
}
