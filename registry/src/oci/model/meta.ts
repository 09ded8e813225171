/**
 * Where the OCI API keeps its small documents in the MetaStore, and their shapes. Per hosted
 * index and repository:
 *
 *   oci/<index>/repos/<repo path>/_tags                  tag -> manifest digest (hex)
 *   oci/<index>/repos/<repo path>/_manifests/<hex>       one pushed manifest (media type, size, ...)
 *   oci/<index>/repos/<repo path>/_referrers/<hex>       descriptors of manifests whose subject is <hex>
 *   oci/<index>/repos/<repo path>/_digests               the hex of every manifest recorded in the repository
 *   oci/<index>/catalog                                  the names of the repositories with a manifest
 *
 * Repository components never start with "_" (name grammar), so the "_" documents cannot collide
 * with a nested repository such as `a/_tags`. Manifest bytes themselves are blobs in the shared
 * content-addressed store. Every blob that came in through /v2 (push, mount, manifest) is held
 * by the repository that received it (read/index-holds.ts); a repository sees exactly the blobs it
 * holds.
 */
import type { IndexConfig } from '../../config/types.js';

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  artifactType?: string;
  annotations?: Record<string, string>;
}

export interface ManifestRecord {
  mediaType: string;
  size: number;
  /** Hex of the declared subject's sha256 digest. */
  subject?: string;
  /** The descriptor the referrers API lists for this manifest. */
  descriptor: Descriptor;
  /** When it was first pushed (ISO 8601); what retention's `untagged_after` counts from. */
  pushedAt: string;
  /** Which credential pushed it first (`upload_token`, `token:<name>`); absent for a pull-through or an earlier version's record. */
  pushedBy?: string;
  /**
   * When a retention run first saw a record that has no `pushedAt` (one an earlier version
   * wrote without it): the time retention counts from instead (ISO 8601).
   */
  firstSeenAt?: string;
}

export interface TagsDoc {
  tags: Record<string, string>;
  /**
   * When each tag was last pointed at a manifest (ISO 8601), by tag: what retention's
   * `keep_tags` orders by. A tag written before these times were kept has none (its manifest's
   * `pushedAt` stands in).
   */
  taggedAt?: Record<string, string>;
  /**
   * A cached index's tags only: until when the upstream's last answer about each tag holds (ms
   * since the epoch). Kept with the mapping so that every worker and replica serves a confirmed
   * tag without asking the upstream (oci/read/cached/confirmations.ts).
   */
  confirmedUntil?: Record<string, number>;
  /**
   * A cached index with `upstream_deletions = "keep"`: the tags its upstream no longer has, still
   * served from the stored mapping, by tag, with when the upstream first answered so (ms since
   * the epoch). Cleared when the upstream confirms or moves the tag again.
   */
  keptSince?: Record<string, number>;
}

export interface ReferrersDoc {
  /** Referrer manifest hex -> its descriptor, in push order. */
  referrers: Record<string, Descriptor>;
}

export function repoPrefix(index: IndexConfig, repo: readonly string[]): string {
  // Index names are safe key segments: the config schema allows nothing else.
  return `${reposFolder(index)}/${repo.join('/')}`;
}

/** The folder of every repository document of one index (what the catalog lists). */
export function reposFolder(index: IndexConfig): string {
  return `oci/${index.name}/repos`;
}

/** The index's repository names (storage/name-set.ts): outside `reposFolder`, which it mirrors. */
export function catalogKey(index: IndexConfig): string {
  return `oci/${index.name}/catalog`;
}

export const keys = {
  tags: (index: IndexConfig, repo: readonly string[]) => `${repoPrefix(index, repo)}/_tags`,
  manifest: (index: IndexConfig, repo: readonly string[], hex: string) => `${repoPrefix(index, repo)}/_manifests/${hex}`,
  referrers: (index: IndexConfig, repo: readonly string[], subjectHex: string) => `${repoPrefix(index, repo)}/_referrers/${subjectHex}`,
  /** A NameSet of the `_manifests` hexes (storage/name-set.ts): counted without a listing. */
  digests: (index: IndexConfig, repo: readonly string[]) => `${repoPrefix(index, repo)}/_digests`,
};
