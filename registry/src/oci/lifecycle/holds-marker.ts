/**
 * What the OCI documents reference, for the garbage collector (lifecycle/): its `HoldsMarker`.
 * Holder names are read/index-holds.ts's: `oci.<index>/<repo>` (a hosted repository),
 * `oci.<index>` (a cached index, or a hosted index's hold from an earlier version) and the plain
 * `oci` of a still earlier version, which no read looks at.
 *
 * For every repository found under `oci/<index>/repos/` (every index in the store, configured or
 * not), the manifests it keeps: each recorded manifest (`_manifests/<hex>`), each tag's target,
 * each referrer and subject named by `_referrers`, each digest of `_digests`. Each manifest's
 * stored bytes are read and what they name is marked too: config, layers, an index's child
 * manifests (whose bytes are read in turn) and the subject. Every such digest is marked for the
 * repository's holder and for its index's holder (which covers a cached index, and an earlier
 * version's index-wide hold of a hosted one). The plain `oci` holder is owned and marks nothing.
 *
 * Upload sessions hold nothing: a session's chunks are not blobs, and its commit holds the digest
 * just before it publishes the bytes (a young hold, protected by the grace period).
 *
 * A manifest that is not JSON names nothing; bytes that do not read (the store not answering, or
 * changed behind its back) fail the mark, and the collection judges nothing.
 *
 * Owned holders are those of the OCI indexes of this config: a hold of an index the config does
 * not name (removed, or added on another replica first) is kept. `indexOf` reads the index from
 * the holder's name (`oci.<index>` and `oci.<index>/<repo>` -> `<index>`; `oci` -> null).
 */
import { buffer } from 'node:stream/consumers';
import { digestsIn, type HoldsMarker, type Marks, type MarkServices } from '../../lifecycle/marks.js';
import type { BlobStore } from '../../storage/types.js';
import { isObject, MAX_MANIFEST_BYTES, referencedHexes } from '../model/manifest-check.js';
import { holderName, indexOfHolder, repoHolderName } from '../read/index-holds.js';

/** The holder of a still earlier version, owned by no index (read/index-holds.ts). */
const LEGACY_HOLDER = 'oci';
/** Documents and manifests read at once. */
const AT_ONCE = 8;

/** `oci/<index>/repos/<repo...>/_<doc>[/<hex>]` */
function repositoryOf(key: string): { index: string; repo: string[]; doc: string; rest: string[] } | null {
  const parts = key.split('/');
  if (parts[0] !== 'oci' || parts[2] !== 'repos' || parts[1] === undefined) return null;
  const at = parts.findIndex((p, i) => i > 2 && p.startsWith('_'));
  if (at < 4) return null;
  return { index: parts[1], repo: parts.slice(3, at), doc: parts[at]!, rest: parts.slice(at + 1) };
}

export function ociHoldsMarker({ meta, blobs, indexes }: MarkServices): HoldsMarker {
  const names = new Set(indexes.filter((ix) => ix.ecosystem === 'oci').map((ix) => ix.name));
  return {
    owns(holder) {
      if (holder === LEGACY_HOLDER) return true;
      const index = indexOfHolder(holder);
      return index !== null && names.has(index);
    },
    // A repository's holder belongs to its index; the plain `oci` to none.
    indexOf: indexOfHolder,
    async mark(marks) {
      // Repository (`<index>\n<repo>`) -> the manifests it keeps.
      const kept = new Map<string, { index: string; repo: string[]; manifests: Set<string> }>();
      const keep = (index: string, repo: string[], hexes: Iterable<string>): void => {
        const id = `${index}\n${repo.join('/')}`;
        let entry = kept.get(id);
        if (!entry) kept.set(id, (entry = { index, repo, manifests: new Set() }));
        for (const hex of hexes) entry.manifests.add(hex);
      };
      const read = async (key: string): Promise<void> => {
        const at = repositoryOf(key);
        if (!at) return;
        // A manifest's key names it, and its bytes are read below.
        if (at.doc === '_manifests') return keep(at.index, at.repo, at.rest);
        const doc = (await meta.get<unknown>(key))?.doc;
        if (doc !== undefined) keep(at.index, at.repo, [...at.rest, ...digestsIn(doc, { keys: true })]);
      };
      await inBatches(meta.list('oci'), read, marks.pace);
      await inBatches(kept.values(), ({ index, repo, manifests }) => markRepository(marks, blobs, [repoHolderName(index, repo), holderName(index)], manifests), marks.pace);
    },
  };
}

/** Marks `manifests` and everything they name, following index children, for each of `holders`. */
async function markRepository(marks: Marks, blobs: BlobStore, holders: string[], manifests: Set<string>): Promise<void> {
  const seen = new Set<string>();
  let wave = [...manifests];
  while (wave.length > 0) {
    const next: string[] = [];
    await inBatches(wave, async (hex) => {
      if (seen.has(hex)) return;
      seen.add(hex);
      for (const holder of holders) marks.add(holder, hex);
      const named = await namedBy(blobs, hex);
      for (const ref of named.all) for (const holder of holders) marks.add(holder, ref);
      next.push(...named.children);
    }, marks.pace);
    wave = next.filter((hex) => !seen.has(hex));
  }
}

/** What the manifest stored under `hex` names: every digest, and the child manifests among them. */
async function namedBy(blobs: BlobStore, hex: string): Promise<{ all: string[]; children: string[] }> {
  const none = { all: [], children: [] };
  const info = await blobs.stat(hex);
  if (!info || info.size > MAX_MANIFEST_BYTES) return none;
  const stream = await blobs.get(hex);
  if (!stream) return none;
  let doc: unknown;
  try {
    doc = JSON.parse((await buffer(stream)).toString('utf8'));
  } catch {
    return none;
  }
  if (!isObject(doc)) return none;
  const all = referencedHexes(doc);
  if (isObject(doc.subject) && typeof doc.subject.digest === 'string') all.push(...digestsIn(doc.subject.digest));
  const children = Array.isArray(doc.manifests) ? digestsIn(doc.manifests.map((m: unknown) => (isObject(m) ? m.digest : undefined))) : [];
  return { all, children };
}

async function inBatches<T>(items: AsyncIterable<T> | Iterable<T>, fn: (item: T) => Promise<void>, pace: () => Promise<void>): Promise<void> {
  let batch: Promise<void>[] = [];
  for await (const item of items) {
    batch.push(fn(item));
    if (batch.length >= AT_ONCE) {
      await Promise.all(batch);
      batch = [];
      await pace();
    }
  }
  await Promise.all(batch);
}
