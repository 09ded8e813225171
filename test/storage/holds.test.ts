/**
 * Per-digest holds over the real fs stores: idempotent holds, bytes deleted with the last holder
 * only, concurrent holders all recorded, and the order that keeps a release from deleting bytes
 * a concurrent hold has just stored. Also that the neutral roles hold what they store under the
 * name their caller gives them.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { DocCache } from '../../registry/src/roles/read-through.js';
import { BlobFlights } from '../../registry/src/roles/single-flight.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { BlobHolds } from '../../registry/src/storage/holds.js';
import type { BlobStore, Sha256Hex } from '../../registry/src/storage/types.js';
import { tempDir } from '../support/velodex.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

async function stores() {
  const root = tempDir('velodex-holds-');
  const blobs = new FsBlobStore(root);
  const meta = new FsMetaStore(root);
  await blobs.init();
  await meta.init();
  const put = async (text: string) => (await blobs.put(Readable.from([Buffer.from(text)]), sha(text))).digest;
  return { root, blobs, meta, put };
}

/** A BlobStore whose `delete` waits for `gate` before (or instead of) deleting. */
function gatedDeletes(inner: BlobStore, gate: () => Promise<void>): BlobStore {
  return {
    put: (s, e) => inner.put(s, e),
    stage: (o) => inner.stage(o),
    get: (d, r) => inner.get(d, r),
    stat: (d) => inner.stat(d),
    delete: async (d: Sha256Hex) => {
      await gate();
      return inner.delete(d);
    },
    list: () => inner.list(),
  };
}

describe('BlobHolds', () => {
  it('records a hold once: a second hold adds no holder, and refreshes its time (a touch)', async () => {
    const { blobs, meta } = await stores();
    let now = 1000;
    const holds = new BlobHolds(meta, blobs, { now: () => now });
    const hex = sha('x');
    expect(await holds.hold(hex, 'python')).toBe(true);
    const key = `holds/${hex.slice(0, 2)}/${hex}`;
    expect((await meta.get(key))?.doc).toEqual({ holders: ['python'], touched: { python: 1000 } });
    now = 5000;
    expect(await holds.hold(hex, 'python')).toBe(false);
    expect((await meta.get(key))?.doc).toEqual({ holders: ['python'], touched: { python: 5000 } });
    expect(await holds.holders(hex)).toEqual(['python']);
    expect(await holds.isHeldBy(hex, 'python')).toBe(true);
    expect(await holds.isHeldBy(hex, 'oci')).toBe(false);
  });

  it('writes a fresh hold without reading first, and where a document exists after all (another holder, a release) holds as usual', async () => {
    const { blobs, meta } = await stores();
    let now = 1000;
    const holds = new BlobHolds(meta, blobs, { now: () => now });
    const hex = sha('fresh');
    const key = `holds/${hex.slice(0, 2)}/${hex}`;
    expect(await holds.hold(hex, 'oci', 10, { fresh: true })).toBe(true);
    expect((await meta.get(key))?.doc).toEqual({ holders: ['oci'], touched: { oci: 1000 } });
    // Another holder's document is there: the fresh write fails and the holder is added to it.
    now = 2000;
    expect(await holds.hold(hex, 'python', 10, { fresh: true })).toBe(true);
    expect((await meta.get(key))?.doc).toEqual({ holders: ['oci', 'python'], touched: { oci: 1000, python: 2000 } });
    // Its own hold again: a touch, as without `fresh`.
    now = 3000;
    expect(await holds.hold(hex, 'oci', 10, { fresh: true })).toBe(false);
    expect((await meta.get(key))?.doc).toEqual({ holders: ['oci', 'python'], touched: { oci: 3000, python: 2000 } });
  });

  it('deletes the bytes and the document when the last holder releases', async () => {
    const { blobs, meta, put } = await stores();
    const holds = new BlobHolds(meta, blobs);
    const hex = sha('only oci');
    await holds.hold(hex, 'oci');
    await put('only oci');
    expect(await holds.release(hex, 'oci')).toEqual({ released: true, last: true, deleted: true });
    expect(await blobs.stat(hex)).toBeNull();
    expect(await meta.get(`holds/${hex.slice(0, 2)}/${hex}`)).toBeNull();
    expect(await holds.holders(hex)).toEqual([]);
    // Released already: nothing left to release.
    expect(await holds.release(hex, 'oci')).toEqual({ released: false, last: false, deleted: false });
  });

  it('keeps the bytes while another holder remains, and never releases for a non-holder', async () => {
    const { blobs, meta, put } = await stores();
    const holds = new BlobHolds(meta, blobs);
    const hex = sha('shared');
    await holds.hold(hex, 'python');
    await holds.hold(hex, 'oci');
    await put('shared');
    expect(await holds.holders(hex)).toEqual(['oci', 'python']);
    expect(await holds.release(hex, 'other')).toEqual({ released: false, last: false, deleted: false });
    expect(await holds.release(hex, 'oci')).toEqual({ released: true, last: false, deleted: false });
    expect(await blobs.stat(hex)).not.toBeNull();
    expect(await holds.holders(hex)).toEqual(['python']);
    expect(await holds.release(hex, 'oci')).toEqual({ released: false, last: false, deleted: false });
    expect(await blobs.stat(hex)).not.toBeNull();
  });

  it('records every one of many concurrent holders (compare-and-swap)', async () => {
    const { blobs, meta } = await stores();
    const holds = new BlobHolds(meta, blobs);
    const hex = sha('popular');
    const names = Array.from({ length: 40 }, (_, i) => `holder-${String(i).padStart(2, '0')}`);
    const added = await Promise.all([...names, ...names].map((n) => holds.hold(hex, n)));
    // Each name was new exactly once.
    expect(added.filter(Boolean)).toHaveLength(names.length);
    expect(await holds.holders(hex)).toEqual(names);
  });

  it('a hold that races a release waits for the deletion, so the bytes it stores survive', async () => {
    const { blobs, meta, put } = await stores();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const holds = new BlobHolds(meta, gatedDeletes(blobs, () => gate));
    const hex = sha('contested');
    await holds.hold(hex, 'oci');
    await put('contested');

    const releasing = holds.release(hex, 'oci');
    // The release has marked the document and is now stuck in the byte deletion.
    await new Promise((r) => setTimeout(r, 50));
    expect(await holds.holders(hex)).toEqual([]);
    let held = false;
    const holding = holds.hold(hex, 'python').then(async (added) => {
      held = added;
      await put('contested');
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(held).toBe(false);

    open();
    expect(await releasing).toEqual({ released: true, last: true, deleted: true });
    await holding;
    expect(held).toBe(true);
    expect(await holds.holders(hex)).toEqual(['python']);
    expect(await blobs.stat(hex)).not.toBeNull();
  });

  it('takes over a release marker that went stale (the documented window)', async () => {
    const { blobs, meta } = await stores();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const holds = new BlobHolds(meta, gatedDeletes(blobs, () => gate), { staleMs: 100 });
    const hex = sha('stalled');
    await holds.hold(hex, 'oci');
    const releasing = holds.release(hex, 'oci');
    await new Promise((r) => setTimeout(r, 20));
    const started = Date.now();
    expect(await holds.hold(hex, 'python')).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(50);
    open();
    // The stalled release finishes without removing the new holder's document.
    expect((await releasing).released).toBe(true);
    expect(await holds.holders(hex)).toEqual(['python']);
  });

  it('puts the hold back when the bytes cannot be deleted', async () => {
    const { blobs, meta, put } = await stores();
    const holds = new BlobHolds(meta, gatedDeletes(blobs, () => Promise.reject(new Error('disk on fire'))));
    const hex = sha('stuck');
    await holds.hold(hex, 'oci');
    await put('stuck');
    await expect(holds.release(hex, 'oci')).rejects.toThrow('disk on fire');
    expect(await holds.holders(hex)).toEqual(['oci']);
    expect(await blobs.stat(hex)).not.toBeNull();
  });

  it('refuses malformed digests and holder names', async () => {
    const { blobs, meta } = await stores();
    const holds = new BlobHolds(meta, blobs);
    await expect(holds.hold('nope', 'python')).rejects.toThrow(/sha256/);
    await expect(holds.hold(sha('a'), '../x')).rejects.toThrow(/holder/);
    expect(() => holds.as('')).toThrow(/holder/);
    for (const name of ['a/', '/a', 'a//b', 'a/../b', 'a/./b', 'a/.b', 'a b', 'a\\b', `a/${'b'.repeat(512)}`]) {
      await expect(holds.hold(sha('a'), name), name).rejects.toThrow(/holder/);
    }
    expect(await holds.holders(sha('a'))).toEqual([]);
  });

  it('takes holder names of several segments (a holder inside a holder) as distinct names', async () => {
    const { blobs, meta, put } = await stores();
    const holds = new BlobHolds(meta, blobs);
    const hex = sha('nested');
    expect(await holds.hold(hex, 'oci.team/app/web')).toBe(true);
    expect(await holds.hold(hex, 'oci.team')).toBe(true);
    await put('nested');
    expect(await holds.holders(hex)).toEqual(['oci.team', 'oci.team/app/web']);
    expect(await holds.release(hex, 'oci.team/app')).toEqual({ released: false, last: false, deleted: false });
    expect((await holds.release(hex, 'oci.team/app/web')).released).toBe(true);
    expect(await holds.release(hex, 'oci.team')).toEqual({ released: true, last: true, deleted: true });
    expect(await blobs.stat(hex)).toBeNull();
  });
});

describe('BlobHolds for the collector', () => {
  const keyOf = (hex: string) => `holds/${hex.slice(0, 2)}/${hex}`;

  it('keeps each holder\'s time; a release drops only its own', async () => {
    const { blobs, meta } = await stores();
    let now = 10;
    const holds = new BlobHolds(meta, blobs, { now: () => now });
    const hex = sha('timed');
    await holds.hold(hex, 'oci.a/x');
    now = 20;
    await holds.hold(hex, 'python');
    expect((await holds.entry(hex))?.doc.touched).toEqual({ 'oci.a/x': 10, python: 20 });
    await holds.release(hex, 'python');
    expect((await holds.entry(hex))?.doc).toEqual({ holders: ['oci.a/x'], touched: { 'oci.a/x': 10 } });
  });

  it('reads a holder an earlier version recorded without a time as held now, until a collection stamps it', async () => {
    const { blobs, meta } = await stores();
    let now = 100;
    const holds = new BlobHolds(meta, blobs, { now: () => now });
    const hex = sha('old');
    await meta.put(keyOf(hex), { holders: ['python'] }, null);
    const entry = (await holds.entry(hex))!;
    expect(holds.heldAt(entry.doc, 'python')).toBe(100);
    now = 200;
    expect(holds.heldAt(entry.doc, 'python')).toBe(200);
    expect(await holds.stampUntimed(entry)).toBe(true);
    expect((await holds.entry(hex))?.doc).toEqual({ holders: ['python'], touched: { python: 200 } });
    // Judged on a version that is gone: nothing written.
    expect(await holds.stampUntimed(entry)).toBe(false);
  });

  it('releases on the judged version only: a touch in between keeps the hold and the bytes', async () => {
    const { blobs, meta, put } = await stores();
    const holds = new BlobHolds(meta, blobs);
    const hex = sha('judged');
    await holds.hold(hex, 'oci.a/x');
    await put('judged');
    const judged = (await holds.entry(hex))!;
    await holds.hold(hex, 'oci.a/x');
    expect(await holds.releaseJudged(judged, ['oci.a/x'])).toEqual({ released: false, last: false, deleted: false });
    expect(await holds.holders(hex)).toEqual(['oci.a/x']);
    expect(await blobs.stat(hex)).not.toBeNull();

    const again = (await holds.entry(hex))!;
    expect(await holds.releaseJudged(again, ['oci.a/x'])).toEqual({ released: true, last: true, deleted: true });
    expect(await blobs.stat(hex)).toBeNull();
    expect(await holds.entry(hex)).toBeNull();
  });

  it('releases some holders of a digest and keeps the bytes for the rest', async () => {
    const { blobs, meta, put } = await stores();
    const holds = new BlobHolds(meta, blobs);
    const hex = sha('partly');
    await holds.hold(hex, 'oci.a/x');
    await holds.hold(hex, 'python');
    await put('partly');
    const entry = (await holds.entry(hex))!;
    expect(await holds.releaseJudged(entry, ['oci.a/x'])).toEqual({ released: true, last: false, deleted: false });
    expect(await holds.holders(hex)).toEqual(['python']);
    expect(await blobs.stat(hex)).not.toBeNull();
  });

  it('deletes unheld bytes only while no document exists; a hold racing it waits and stores its bytes again', async () => {
    const { blobs, meta, put } = await stores();
    const holds = new BlobHolds(meta, blobs);
    const held = sha('held meanwhile');
    await put('held meanwhile');
    await holds.hold(held, 'python');
    expect(await holds.deleteUnheld(held)).toBeNull();
    expect(await blobs.stat(held)).not.toBeNull();

    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const gated = new BlobHolds(meta, gatedDeletes(blobs, () => gate));
    const orphan = sha('orphan');
    await put('orphan');
    const deleting = gated.deleteUnheld(orphan);
    await new Promise((r) => setTimeout(r, 50));
    let stored = false;
    const writer = gated.hold(orphan, 'python').then(async () => {
      await put('orphan');
      stored = true;
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(stored).toBe(false);
    open();
    expect(await deleting).toBe(true);
    await writer;
    expect(await holds.holders(orphan)).toEqual(['python']);
    expect(await blobs.stat(orphan)).not.toBeNull();
  });

  it('finishes a deletion a killed process left (a stale marker), unless a hold took it over first', async () => {
    const { blobs, meta, put } = await stores();
    let now = 0;
    const holds = new BlobHolds(meta, blobs, { staleMs: 1000, now: () => now });
    const hex = sha('left behind');
    await put('left behind');
    await meta.put(keyOf(hex), { holders: [], releasing: 0 }, null);
    let entry = (await holds.entry(hex))!;
    expect(holds.isStale(entry.doc)).toBe(false);
    now = 1000;
    expect(holds.isStale(entry.doc)).toBe(true);
    expect(await holds.finishStale(entry)).toBe(true);
    expect(await blobs.stat(hex)).toBeNull();
    expect(await holds.entry(hex)).toBeNull();

    const taken = sha('taken over');
    await meta.put(keyOf(taken), { holders: [], releasing: 0 }, null);
    entry = (await holds.entry(taken))!;
    expect(await holds.hold(taken, 'python')).toBe(true);
    await put('taken over');
    expect(await holds.finishStale(entry)).toBeNull();
    expect(await blobs.stat(taken)).not.toBeNull();
  });

  it('touchStored holds again and reports the digests whose bytes are gone', async () => {
    const { blobs, meta, put } = await stores();
    let now = 1;
    const holds = new BlobHolds(meta, blobs, { now: () => now });
    const here = sha('here');
    const lost = sha('lost');
    await holds.hold(here, 'oci.a/x');
    await holds.hold(lost, 'oci.a/x');
    await put('here');
    now = 50;
    expect(await holds.as('oci.a/x').touchStored([here, lost, here])).toEqual([lost]);
    expect((await holds.entry(here))?.doc.touched).toEqual({ 'oci.a/x': 50 });
  });
});

describe('roles that store blobs', () => {
  it('the single-flight holds a published blob under the caller\'s name, before storing it', async () => {
    const { blobs, meta } = await stores();
    const holds = new BlobHolds(meta, blobs);
    const order: string[] = [];
    const holder = holds.as('python');
    const store = gatedDeletes(blobs, () => Promise.resolve());
    store.stage = async (opts) => {
      const stage = await blobs.stage(opts);
      const commit = stage.commit.bind(stage);
      stage.commit = (expected) => {
        order.push('put');
        return commit(expected);
      };
      return stage;
    };
    const watched = {
      ...holder,
      hold: (hex: string) => {
        order.push('hold');
        return holder.hold(hex);
      },
    };
    const flights = new BlobFlights({ store, holder: watched });
    const delivery = await flights.open('k', async () => ({ body: Readable.from([Buffer.from('flown')]), expected: sha('flown'), meta: null }));
    delivery!.stream.resume();
    expect((await delivery!.outcome).kind).toBe('published');
    expect(order).toEqual(['hold', 'put']);
    expect(await holds.holders(sha('flown'))).toEqual(['python']);
    expect(await blobs.stat(sha('flown'))).not.toBeNull();
  });

  it('the document cache holds the page bodies it stores', async () => {
    const { blobs, meta } = await stores();
    const holds = new BlobHolds(meta, blobs);
    const cache = new DocCache({ meta, blobs, holder: holds.as('python') });
    const body = Buffer.from('{"files": []}');
    const doc = await cache.read('python/cache/pages/x', async () => ({ status: 'ok', body, headers: {} }));
    expect(doc?.record.digest).toBe(sha('{"files": []}'));
    expect(await holds.holders(sha('{"files": []}'))).toEqual(['python']);
  });
});
