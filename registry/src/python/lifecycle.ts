/**
 * What Python's documents reference, for the garbage collector (lifecycle/): its `HoldsMarker`.
 * Every blob Python stores (uploads and their core metadata, cached pages, files, metadata and
 * signature siblings) is held under the one holder `python` (model/records.ts), so its mark is
 * one set, the union over every Python index found in the store (configured or not):
 *
 * - each document under `python/`, read whole: every sha256 it names as a value (project records'
 *   files and metadata, the cached pages' and project list's digests, metadata and signature
 *   links). Read generically (`digestsIn`), so a field added later is not missed;
 * - each cached page (`python/<index>/cache/pages/<project>`): its stored bytes parsed as the
 *   index parses them, and every file's sha256 and metadata sibling's sha256 it lists: the cached
 *   files the page serves. A file the upstream dropped from the page (and its bytes) goes.
 *
 * A page whose bytes are gone, changed or cannot be parsed serves no file, so it names none; a
 * store that does not answer fails the mark (and the collection) instead.
 */
import { buffer } from 'node:stream/consumers';
import { digestsIn, type HoldsMarker, type Marks, type MarkServices } from '../lifecycle/marks.js';
import type { CachedDoc } from '../roles/freshness.js';
import { DigestMismatchError } from '../storage/types.js';
import { PYTHON_HOLDER } from './model/records.js';
import { parseUpstreamPage } from './read/cached/upstream-page.js';

const CACHED_PAGE = /^python\/[^/]+\/cache\/pages\/([^/]+)$/;
/** Documents read at once. */
const AT_ONCE = 8;

export function pythonHoldsMarker({ meta, blobs }: MarkServices): HoldsMarker {
  const markPage = async (marks: Marks, project: string, record: CachedDoc): Promise<void> => {
    const stream = await blobs.get(record.digest);
    if (!stream) return;
    let bytes: Buffer;
    try {
      bytes = await buffer(stream);
    } catch (err) {
      // Bytes changed in the store: the index cannot serve the page either (it fetches it again).
      // Any other failure (the store not answering) fails the mark: nothing is judged on half of it.
      if (err instanceof DigestMismatchError) return;
      throw err;
    }
    let page;
    try {
      // Only the digests matter: links resolve against any base.
      page = parseUpstreamPage(bytes, record.contentType, `https://upstream.invalid/${project}/`);
    } catch {
      // Unreadable: the index serves no file from it either.
      return;
    }
    for (const file of page.files) {
      if (file.sha256) marks.add(PYTHON_HOLDER, file.sha256);
      if (typeof file.metadata === 'object') marks.add(PYTHON_HOLDER, file.metadata.sha256);
    }
  };
  const markDoc = async (marks: Marks, key: string): Promise<void> => {
    const doc = (await meta.get<unknown>(key))?.doc;
    if (doc === undefined) return;
    for (const hex of digestsIn(doc)) marks.add(PYTHON_HOLDER, hex);
    const page = CACHED_PAGE.exec(key);
    if (page?.[1] && isCachedDoc(doc)) await markPage(marks, page[1], doc);
  };
  return {
    owns: (holder) => holder === PYTHON_HOLDER,
    // One holder for every Python index: its digests count for the indexes that reference them.
    indexOf: () => null,
    async mark(marks) {
      const batch: Promise<void>[] = [];
      for await (const key of meta.list('python')) {
        batch.push(markDoc(marks, key));
        if (batch.length >= AT_ONCE) await Promise.all(batch.splice(0));
      }
      await Promise.all(batch);
    },
  };
}

function isCachedDoc(doc: unknown): doc is CachedDoc {
  return typeof doc === 'object' && doc !== null && typeof (doc as CachedDoc).digest === 'string' && /^[0-9a-f]{64}$/.test((doc as CachedDoc).digest);
}
