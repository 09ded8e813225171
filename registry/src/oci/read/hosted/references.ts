/**
 * Which manifest of a hosted repository still names a digest: what a blob DELETE, and the release
 * of a deleted manifest's bytes, ask before they let the repository's hold go, so that no delete
 * takes bytes from under a manifest the repository still serves.
 *
 * Nothing is kept for it on the write path: a DELETE (rare) reads the repository's digest set
 * (one document) and then each recorded manifest that the repository still sees, its bytes from
 * the in-memory cache by digest (`BlobBytes`, immutable) and its holders, `AT_ONCE` manifests at
 * a time, stopping at the first that names the digest. So its cost grows with the number of
 * manifests in the repository, not with pushes, and stores written by earlier versions need no
 * migration. The subject of a manifest is no reference (referrers may outlive their subject).
 *
 * The window that remains: a manifest PUT in the same repository that checked the blob before a
 * concurrent DELETE released it, and recorded its manifest after that DELETE read the manifests,
 * leaves a manifest naming bytes the repository no longer holds (and that may be gone); so does a
 * PUT of the very manifest a concurrent manifest DELETE is letting go of. It takes a writer of
 * that repository deleting what it is pushing at the same moment, and pushing again repairs it;
 * another repository's or index's writes cannot cause it, as each holds for itself.
 */
import { referencedHexesOf } from '../../model/manifest-check.js';
import type { BlobBytes } from '../blob-bytes.js';
import type { HostedRepos } from './repos.js';
import { seenIn, type IndexHolds } from '../index-holds.js';

/** Manifests read at once. */
const AT_ONCE = 8;

export interface ReferenceSources {
  repos: HostedRepos;
  holds: IndexHolds;
  blobBytes: BlobBytes;
}

/**
 * The hex of a manifest recorded in `repo` (other than `except`) that the repository still sees
 * and that names `hex` as its config, a layer or a child manifest; undefined when none does.
 */
export async function referencingManifest(src: ReferenceSources, repo: readonly string[], hex: string, except?: string): Promise<string | undefined> {
  const manifests = (await src.repos.manifestDigests(repo)).filter((m) => m !== except && m !== hex);
  const names = async (manifest: string): Promise<boolean> => {
    const [holders, bytes] = await Promise.all([src.holds.holders(manifest), src.blobBytes.get(manifest)]);
    // A manifest whose bytes the repository let go (a blob DELETE of its digest) serves nothing.
    if (!bytes || !seenIn(holders, src.repos.index, repo)) return false;
    return referencedHexesOf(bytes).includes(hex);
  };
  for (let i = 0; i < manifests.length; i += AT_ONCE) {
    const batch = manifests.slice(i, i + AT_ONCE);
    const found = await Promise.all(batch.map(names));
    const hit = batch.find((_, j) => found[j]);
    if (hit !== undefined) return hit;
  }
  return undefined;
}
