/**
 * What Python's documents reference, for the garbage collector (lifecycle/): its `HoldsMarker`.
 * Every blob Python stores (uploads and their core metadata, cached pages, files, metadata and
 * signature siblings) is held by the index it was stored for, `python.<index>` (model/records.ts
 * `pythonHolder`); earlier versions held all of them under the one legacy holder `python`.
 * Every Python document lives under its index's folder, `python/<index>/...`, so a digest a
 * document names is marked for `python.<index>` of that folder, and for the legacy `python` too
 * (the union over every index: a legacy hold stays while any index references its bytes). Every
 * Python index found in the store is marked, configured or not, so every `python.<anything>` is
 * owned. A document directly under `python/` (none is written today) belongs to no index: it
 * marks the legacy holder only, since a per-index hold is only ever taken by a write whose
 * documents are in that index's folder. What is marked:
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
import { PYTHON_HOLDER, pythonHolder, pythonHolderIndex } from './model/records.js';
import { parseUpstreamPage } from './read/cached/upstream-page.js';

const CACHED_PAGE = /^python\/[^/]+\/cache\/pages\/([^/]+)$/;
/** `python/<index>/<anything>`: the index a document belongs to. */
const INDEX_FOLDER = /^python\/([^/]+)\/./;
/** Documents read at once. */
const AT_ONCE = 8;

export function pythonHoldsMarker({ meta, blobs }: MarkServices): HoldsMarker {
  const markPage = async (add: (hex: string) => void, project: string, record: CachedDoc): Promise<void> => {
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
      if (file.sha256) add(file.sha256);
      if (typeof file.metadata === 'object') add(file.metadata.sha256);
    }
  };
  const markDoc = async (marks: Marks, key: string): Promise<void> => {
    const doc = (await meta.get<unknown>(key))?.doc;
    if (doc === undefined) return;
    const index = INDEX_FOLDER.exec(key)?.[1];
    const holder = index === undefined ? null : pythonHolder(index);
    const add = (hex: string): void => {
      marks.add(PYTHON_HOLDER, hex);
      if (holder) marks.add(holder, hex);
    };
    for (const hex of digestsIn(doc)) add(hex);
    const page = CACHED_PAGE.exec(key);
    if (page?.[1] && isCachedDoc(doc)) await markPage(add, page[1], doc);
  };
  return {
    owns: (holder) => holder === PYTHON_HOLDER || pythonHolderIndex(holder) !== null,
    indexOf: pythonHolderIndex,
    async mark(marks) {
      const batch: Promise<void>[] = [];
      for await (const key of meta.list('python')) {
        batch.push(markDoc(marks, key));
        if (batch.length >= AT_ONCE) {
          await Promise.all(batch.splice(0));
          await marks.pace();
        }
      }
      await Promise.all(batch);
    },
  };
}

function isCachedDoc(doc: unknown): doc is CachedDoc {
  return typeof doc === 'object' && doc !== null && typeof (doc as CachedDoc).digest === 'string' && /^[0-9a-f]{64}$/.test((doc as CachedDoc).digest);
}
