/**
 * updateDoc's group commit: updates of one document that arrive while its write is under way are
 * applied in turn and stored in one write, each acknowledged only once a write holding it is
 * stored; a change that throws fails its own caller only; another process's write in between is
 * still a conflict that is read again and retried. On the fs store, counting its writes.
 */
import { describe, expect, it } from 'vitest';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { updateDoc } from '../../registry/src/storage/update.js';
import { tempDir } from '../support/temp-dirs.js';

/** An fs store that counts its writes and remembers which documents each write stored. */
class CountingStore extends FsMetaStore {
  readonly writes: unknown[] = [];

  override async put<T>(key: string, doc: T, ifVersion?: string | null): Promise<string> {
    const version = await super.put(key, doc, ifVersion);
    this.writes.push(structuredClone(doc));
    return version;
  }
}

async function counting(): Promise<CountingStore> {
  const store = new CountingStore(tempDir('velodex-update-'));
  await store.init();
  return store;
}

type Names = { names: string[] };
const adding = (name: string) => (doc: Names | undefined) => ({ names: [...(doc?.names ?? []), name] });

describe('updateDoc', () => {
  it('writes updates that arrive during a write together, and answers each after a write that holds it', async () => {
    const store = await counting();
    const names = Array.from({ length: 12 }, (_, i) => `n${i}`);
    const results = await Promise.all(
      names.map(async (name) => {
        const result = await updateDoc<Names>(store, 'catalog', adding(name));
        // Acknowledged: a write already stored holds this name.
        expect(store.writes.some((w) => (w as Names).names.includes(name))).toBe(true);
        return result;
      }),
    );
    expect(results.every((r) => r.changed)).toBe(true);
    expect([...((await store.get<Names>('catalog'))?.doc.names ?? [])].sort()).toEqual([...names].sort());
    // The first alone, the eleven that waited for it in one more.
    expect(store.writes).toHaveLength(2);
  });

  it('fails a change that throws on its own; the others of its write are stored', async () => {
    const store = await counting();
    await updateDoc<Names>(store, 'doc', adding('first'));
    const outcomes = await Promise.allSettled([
      updateDoc<Names>(store, 'doc', adding('a')),
      updateDoc<Names>(store, 'doc', () => {
        throw new Error('refused');
      }),
      updateDoc<Names>(store, 'doc', (doc) => (doc?.names.includes('a') ? undefined : adding('b')(doc))),
      updateDoc<Names>(store, 'doc', adding('c')),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    // The third saw the first's change (it ran after it) and left the document as it was.
    expect(outcomes[2]).toMatchObject({ status: 'fulfilled', value: { changed: false } });
    expect((await store.get<Names>('doc'))?.doc.names).toEqual(['first', 'a', 'c']);
  });

  it('reads again and retries when another writer stored the document in between', async () => {
    const store = await counting();
    await updateDoc<Names>(store, 'doc', adding('first'));
    let calls = 0;
    const result = await updateDoc<Names>(store, 'doc', async (doc) => {
      calls++;
      // Another process's write lands between this read and this write, once.
      if (calls === 1) await store.put('doc', { names: [...(doc?.names ?? []), 'other'] });
      return adding('mine')(doc);
    });
    expect(calls).toBe(2);
    expect(result.doc).toEqual({ names: ['first', 'other', 'mine'] });
    expect((await store.get<Names>('doc'))?.doc.names).toEqual(['first', 'other', 'mine']);
  });
});

/** The counting store, with a `seen` guess the test sets, and its reads counted. */
class GuessingStore extends CountingStore {
  reads = 0;
  guess: { doc: unknown; version: string } | null | undefined = undefined;

  override get<T>(key: string): Promise<{ doc: T; version: string } | null> {
    this.reads++;
    return super.get<T>(key);
  }

  seen(): { doc: unknown; version: string } | null | undefined {
    return this.guess;
  }
}

async function guessing(): Promise<GuessingStore> {
  const store = new GuessingStore(tempDir('velodex-update-'));
  await store.init();
  return store;
}

describe('updateDoc starting from what the store last saw (MetaStore.seen)', () => {
  it('writes without a read when the guess is the stored version', async () => {
    const store = await guessing();
    const version = await store.put<Names>('doc', { names: ['a'] }, null);
    store.guess = { doc: { names: ['a'] }, version };
    const result = await updateDoc<Names>(store, 'doc', adding('b'));
    expect(result).toEqual({ doc: { names: ['a', 'b'] }, changed: true });
    expect(store.reads).toBe(0);
    expect((await store.get<Names>('doc'))?.doc).toEqual({ names: ['a', 'b'] });
  });

  it('creates an absent document without a read when it was last seen absent', async () => {
    const store = await guessing();
    store.guess = null;
    await updateDoc<Names>(store, 'new', adding('a'));
    expect(store.reads).toBe(0);
    expect((await store.get<Names>('new'))?.doc).toEqual({ names: ['a'] });
  });

  it('reads and applies the change again when the guess is stale: another writer\'s change is kept', async () => {
    const store = await guessing();
    const old = await store.put<Names>('doc', { names: ['a'] }, null);
    await store.put<Names>('doc', { names: ['a', 'other'] }, old);
    store.guess = { doc: { names: ['a'] }, version: old };
    const result = await updateDoc<Names>(store, 'doc', adding('b'));
    expect(result).toEqual({ doc: { names: ['a', 'other', 'b'] }, changed: true });
    expect(store.reads).toBe(1);
    expect((await store.get<Names>('doc'))?.doc).toEqual({ names: ['a', 'other', 'b'] });
    // Seen absent, but there: the create fails and the document is read.
    store.reads = 0;
    store.guess = null;
    await updateDoc<Names>(store, 'doc', adding('c'));
    expect(store.reads).toBe(1);
    expect((await store.get<Names>('doc'))?.doc).toEqual({ names: ['a', 'other', 'b', 'c'] });
  });

  it('never decides "no change" from a guess: it reads the document and decides on that', async () => {
    const store = await guessing();
    const old = await store.put<Names>('doc', { names: ['a'] }, null);
    await store.put<Names>('doc', { names: [] }, old);
    // The guess already has "a"; the store no longer does.
    store.guess = { doc: { names: ['a'] }, version: old };
    const result = await updateDoc<Names>(store, 'doc', (doc) => (doc?.names.includes('a') ? undefined : adding('a')(doc)));
    expect(result).toEqual({ doc: { names: ['a'] }, changed: true });
    expect(store.reads).toBe(1);
    expect((await store.get<Names>('doc'))?.doc).toEqual({ names: ['a'] });
  });
});
