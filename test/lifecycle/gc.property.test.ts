/**
 * The collection against a model, on the fs stores: random pushes (hold and store each blob,
 * then touch and record a document naming them, as a manifest PUT does), pushes left unfinished
 * and finished later (perhaps after a collection took their blobs: then the push fails cleanly),
 * documents dropping a reference (a deleted manifest), bytes stored without a hold (orphans),
 * time passing, and collections with a grace period of 0 or 2 s. After every step: every digest
 * a document names is stored ("referenced ⇒ present"). After every collection: a stored blob no
 * document names and no push in flight holds is gone once its hold (or, unheld, its bytes) is older
 * than the grace period ("unreferenced and old ⇒ gone").
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { collect } from '../../registry/src/lifecycle/collect.js';
import type { HoldsMarker } from '../../registry/src/lifecycle/marks.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { BlobHolds } from '../../registry/src/storage/holds.js';
import { tempDir } from '../support/velodex.js';

const HOLDERS = ['t.a', 't.b'] as const;
const CONTENTS = ['c0', 'c1', 'c2', 'c3', 'c4'] as const;
/** Real time passes between the model's steps (mtimes are real): judgements this close to the cutoff are not asserted. */
const SLACK_MS = 1500;

type Holder = (typeof HOLDERS)[number];
type Op =
  | { kind: 'start'; holder: Holder; content: string }
  | { kind: 'finish'; holder: Holder }
  | { kind: 'unref'; holder: Holder; content: string }
  | { kind: 'orphan'; content: string }
  | { kind: 'tick'; secs: number }
  | { kind: 'collect'; graceSecs: number };

const holder = fc.constantFrom(...HOLDERS);
const content = fc.constantFrom(...CONTENTS);
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('start' as const), holder, content }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('finish' as const), holder }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('unref' as const), holder, content }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('orphan' as const), content }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), secs: fc.integer({ min: 0, max: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('collect' as const), graceSecs: fc.constantFrom(0, 2) }) },
);

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const docKey = (h: Holder) => `test-docs/${h}`;

async function world() {
  const root = tempDir('velodex-gc-model-');
  const blobs = new FsBlobStore(root);
  const meta = new FsMetaStore(root);
  await blobs.init();
  await meta.init();
  let offset = 0;
  const now = () => Date.now() + offset;
  const holds = new BlobHolds(meta, blobs, { now });
  // The documents of a pretend ecosystem: per holder, the digests it references.
  const marker: HoldsMarker = {
    owns: (h) => h.startsWith('t.'),
    indexOf: (h) => (h.startsWith('t.') ? h.slice(2) : null),
    async mark(marks) {
      for (const h of HOLDERS) for (const hex of (await meta.get<{ refs: string[] }>(docKey(h)))?.doc.refs ?? []) marks.add(h, hex);
    },
  };
  return { blobs, meta, holds, marker, now, advance: (ms: number) => (offset += ms) };
}

async function runModel(ops: Op[]): Promise<void> {
  const w = await world();
  const docs = new Map<Holder, Set<string>>(HOLDERS.map((h) => [h, new Set()]));
  const pending = new Map<Holder, Set<string>>(HOLDERS.map((h) => [h, new Set()]));
  const put = (c: string) => w.blobs.put(Readable.from([Buffer.from(c)]), sha(c));

  for (const step of ops) {
    switch (step.kind) {
      case 'start':
        await w.holds.hold(sha(step.content), step.holder);
        await put(step.content);
        pending.get(step.holder)!.add(sha(step.content));
        break;
      case 'finish': {
        const wanted = [...pending.get(step.holder)!];
        pending.get(step.holder)!.clear();
        if (wanted.length === 0) break;
        const gone = await w.holds.touchStored(wanted, step.holder);
        // A collection took some of the push's blobs: it fails, and records nothing.
        if (gone.length > 0) break;
        for (const hex of wanted) docs.get(step.holder)!.add(hex);
        await w.meta.put(docKey(step.holder), { refs: [...docs.get(step.holder)!] });
        break;
      }
      case 'unref':
        docs.get(step.holder)!.delete(sha(step.content));
        await w.meta.put(docKey(step.holder), { refs: [...docs.get(step.holder)!] });
        break;
      case 'orphan':
        await put(step.content);
        break;
      case 'tick':
        w.advance(step.secs * 1000);
        break;
      case 'collect': {
        // What may go: judged from the holds as they are before the run.
        const cutoff = w.now() - step.graceSecs * 1000 - SLACK_MS;
        const referenced = new Set([...docs.values(), ...pending.values()].flatMap((s) => [...s]));
        const old = new Set<string>();
        for await (const blob of w.blobs.list()) {
          if (referenced.has(blob.digest)) continue;
          const entry = await w.holds.entry(blob.digest);
          const times = entry ? entry.doc.holders.map((h) => entry.doc.touched?.[h] ?? Infinity) : [blob.modifiedMs];
          if (times.every((t) => t < cutoff)) old.add(blob.digest);
        }
        await collect({ blobs: w.blobs, holds: w.holds, sweep: async () => 0, sharedStages: null }, [w.marker], {
          graceMs: step.graceSecs * 1000,
          dryRun: false,
          now: w.now,
        });
        for (const hex of old) expect(await w.blobs.stat(hex), `unreferenced and old: ${hex}`).toBeNull();
        break;
      }
    }
    for (const [h, refs] of docs) for (const hex of refs) expect(await w.blobs.stat(hex), `${h} references ${hex}`).not.toBeNull();
  }
}

describe('garbage collection against a model', () => {
  it('referenced ⇒ present after every step; unreferenced and old ⇒ gone after every collection', async () => {
    await fc.assert(fc.asyncProperty(fc.array(op, { minLength: 5, maxLength: 40 }), runModel), { numRuns: 40 });
  }, 300_000);
});
