/**
 * Who holds which blob for the OCI API. Every blob that came in through /v2 is held among the
 * shared blob store's holds (storage/holds.ts), beside Python's:
 *
 * - a hosted index holds per repository, under `oci.<index>/<repo path>`: a push (monolithic or a
 *   committed session), a mount, and a manifest PUT (its own bytes, and the config, layers and
 *   child manifests it names that the repository can see) hold the digest for that repository,
 *   so /v2/<repo>/blobs/<d> answers only when the repository has the blob, as the distribution
 *   spec expects, and a DELETE in one repository lets go of that repository's hold alone;
 * - a cached index holds per index, under `oci.<index>`: its upstream decides what a repository
 *   has, and cached/blobs.ts asks it before adopting bytes it finds stored;
 * - a hold `oci.<index>` of a hosted index was written by an earlier version, which held per
 *   index: it still shows the blob in every repository of that index, and no repository's DELETE
 *   releases it (handlers/blobs.ts refuses), so those bytes stay until a collector takes them;
 * - a hold under the plain name `oci`, from a still earlier version, belongs to no index: ignored.
 *
 * The bytes go only when no holder is left: no repository, no other index, no Python file.
 * Index names are `[A-Za-z0-9][A-Za-z0-9._-]*` (config schema) and repository components follow the
 * OCI name grammar, so every name is a valid holder name and none can be another ecosystem's; a
 * repository holder contains '/', an index holder does not, so neither can be the other.
 */
import type { IndexConfig } from '../../config/types.js';
import { membersOf } from '../../roles/write-target.js';
import type { BlobHolds, Holder } from '../../storage/holds.js';
import type { ReadOptions, Sha256Hex } from '../../storage/types.js';

/** The holder of a whole index: a cached index's, or a hosted index's from an earlier version. */
export function holderName(indexName: string): string {
  return `oci.${indexName}`;
}

/** The holder of one repository of a hosted index. */
export function repoHolderName(indexName: string, repo: readonly string[]): string {
  return `${holderName(indexName)}/${repo.join('/')}`;
}

/**
 * The index a holder of `holderName` or `repoHolderName` belongs to; null for the plain `oci`
 * (no index's) and for any other name.
 */
export function indexOfHolder(holder: string): string | null {
  const prefix = holderName('');
  if (!holder.startsWith(prefix)) return null;
  const slash = holder.indexOf('/');
  const index = holder.slice(prefix.length, slash < 0 ? undefined : slash);
  return index === '' ? null : index;
}

/**
 * Whether `holders` (of one digest) show the bytes in repository `repo` of `index`, which is a
 * hosted or a cached index: its index-wide hold (cached, or a hosted index's legacy one), or for
 * a hosted index the repository's own.
 */
export function seenIn(holders: readonly string[], index: IndexConfig, repo: readonly string[]): boolean {
  if (holders.includes(holderName(index.name))) return true;
  return index.role === 'hosted' && holders.includes(repoHolderName(index.name, repo));
}

/** Whether any repository of `index` holds the digest (or the whole index does, from an earlier version). */
export function heldInIndex(holders: readonly string[], index: IndexConfig): boolean {
  const whole = holderName(index.name);
  return holders.some((h) => h === whole || h.startsWith(`${whole}/`));
}

/** What a repository of a hosted index sees of a digest, from one read of its holders. */
export interface RepoView {
  /** The repository holds it itself: its DELETE can let go. */
  own: boolean;
  /** An earlier version's index-wide hold: visible, but no repository's DELETE releases it. */
  legacy: boolean;
}

export class IndexHolds {
  constructor(
    private readonly holds: BlobHolds,
    private readonly indexByName: ReadonlyMap<string, IndexConfig>,
  ) {}

  /** The index-wide holder of cached index `indexName`. */
  of(indexName: string): Holder {
    return this.holds.as(holderName(indexName));
  }

  /** The holder of repository `repo` of hosted index `indexName`: what a write to it holds and releases with. */
  ofRepo(indexName: string, repo: readonly string[]): Holder {
    return this.holds.as(repoHolderName(indexName, repo));
  }

  /** Who holds `hex` now: one read. */
  holders(hex: Sha256Hex, opts?: ReadOptions): Promise<string[]> {
    return this.holds.holders(hex, opts);
  }

  /** How repository `repo` of hosted index `hosted` holds `hex`. One read. */
  async inRepo(hosted: IndexConfig, repo: readonly string[], hex: Sha256Hex): Promise<RepoView> {
    return viewOf(await this.holds.holders(hex), hosted, repo);
  }

  /**
   * Whether /v2 under `index` sees `hex` in repository `repo`: the repository of the index, or for
   * a virtual index of one of its OCI members, holds it (`seenIn`). One read.
   */
  async visible(index: IndexConfig, repo: readonly string[], hex: Sha256Hex, opts?: ReadOptions): Promise<boolean> {
    const holders = await this.holds.holders(hex, opts);
    if (holders.length === 0) return false;
    return membersOf(index, this.indexByName).some((m) => m.ecosystem === 'oci' && seenIn(holders, m, repo));
  }
}

export function viewOf(holders: readonly string[], hosted: IndexConfig, repo: readonly string[]): RepoView {
  return { own: holders.includes(repoHolderName(hosted.name, repo)), legacy: holders.includes(holderName(hosted.name)) };
}
