/**
 * The MetaStore contract: compare-and-swap documents with opaque versions, listing, and the
 * read-modify-write helper under concurrent writers. A backend's test file calls
 * `describeMetaStore` with a factory.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ConflictError, type MetaStore } from '../../../registry/src/storage/types.js';
import { updateDoc } from '../../../registry/src/storage/update.js';

export interface MetaStoreUnderTest {
  store: MetaStore;
  cleanup: () => Promise<void>;
}

async function keysUnder(store: MetaStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const k of store.list(prefix)) keys.push(k);
  return keys.sort();
}

export function describeMetaStore(name: string, make: () => Promise<MetaStoreUnderTest>): void {
  describe(`MetaStore contract: ${name}`, () => {
    const opened: MetaStoreUnderTest[] = [];
    const open = async () => {
      const s = await make();
      opened.push(s);
      return s.store;
    };
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((s) => s.cleanup()));
    });

    it('creates only when absent, replaces only an unchanged version', async () => {
      const store = await open();
      expect(await store.get('a/doc')).toBeNull();
      const v1 = await store.put('a/doc', { n: 1 }, null);
      expect(await store.get('a/doc')).toEqual({ doc: { n: 1 }, version: v1 });
      await expect(store.put('a/doc', { n: 2 }, null)).rejects.toBeInstanceOf(ConflictError);
      const v2 = await store.put('a/doc', { n: 2 }, v1);
      expect(v2).not.toBe(v1);
      await expect(store.put('a/doc', { n: 3 }, v1)).rejects.toBeInstanceOf(ConflictError);
      expect(await store.get('a/doc')).toEqual({ doc: { n: 2 }, version: v2 });
    });

    it('refuses a replace of a document that does not exist', async () => {
      const store = await open();
      const v = await store.put('gone/doc', { n: 1 });
      expect(await store.delete('gone/doc')).toBe(true);
      await expect(store.put('gone/doc', { n: 2 }, v)).rejects.toBeInstanceOf(ConflictError);
      expect(await store.get('gone/doc')).toBeNull();
    });

    it('writes unconditionally without a version', async () => {
      const store = await open();
      await store.put('u/doc', { n: 1 });
      const v = await store.put('u/doc', { n: 2 });
      expect(await store.get('u/doc')).toEqual({ doc: { n: 2 }, version: v });
    });

    it('deletes, conditionally on the version when given one', async () => {
      const store = await open();
      const v1 = await store.put('d/doc', { n: 1 });
      await store.put('d/doc', { n: 2 }, v1);
      await expect(store.delete('d/doc', v1)).rejects.toBeInstanceOf(ConflictError);
      expect((await store.get<{ n: number }>('d/doc'))?.doc.n).toBe(2);
      const current = await store.get('d/doc');
      expect(await store.delete('d/doc', current!.version)).toBe(true);
      expect(await store.delete('d/doc')).toBe(false);
      expect(await store.get('d/doc')).toBeNull();
    });

    it('keeps nested and unicode JSON as it was written', async () => {
      const store = await open();
      const doc = { name: 'Ünïcødé', list: [1, 2, { deep: [true, null] }], empty: {} };
      await store.put('j/doc', doc);
      expect((await store.get('j/doc'))?.doc).toEqual(doc);
    });

    it('lists every key below a prefix, at any depth, and nothing beside it', async () => {
      const store = await open();
      await store.put('p/x/one', 1);
      await store.put('p/x/two', 2);
      await store.put('p/x/deeper/three', 3);
      await store.put('p/y/four', 4);
      await store.put('p/xx/five', 5);
      expect(await keysUnder(store, 'p/x')).toEqual(['p/x/deeper/three', 'p/x/one', 'p/x/two']);
      expect(await keysUnder(store, 'p')).toHaveLength(5);
      expect(await keysUnder(store, 'nothing/here')).toEqual([]);
      await store.delete('p/x/one');
      expect(await keysUnder(store, 'p/x')).toEqual(['p/x/deeper/three', 'p/x/two']);
    });

    it('refuses unsafe keys', async () => {
      const store = await open();
      await expect(store.put('p/../escape', 1)).rejects.toThrow(/unsafe metadata key/);
      await expect(store.get('/abs')).rejects.toThrow(/unsafe metadata key/);
      await expect(store.put('', 1)).rejects.toThrow(/unsafe metadata key/);
    });

    it('loses no update among 50 concurrent read-modify-writes', async () => {
      const store = await open();
      await Promise.all(
        Array.from({ length: 50 }, (_, i) => updateDoc<{ seen: number[] }>(store, 'counter/doc', (cur) => ({ seen: [...(cur?.seen ?? []), i] }))),
      );
      const found = await store.get<{ seen: number[] }>('counter/doc');
      expect(found?.doc.seen.slice().sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    });

    it('lets exactly one of concurrent creators win', async () => {
      const store = await open();
      const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => store.put('race/doc', { winner: i }, null)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ConflictError);
    });

    it('leaves a document alone when the change returns undefined', async () => {
      const store = await open();
      const v = await store.put('same/doc', { n: 1 });
      const result = await updateDoc<{ n: number }>(store, 'same/doc', () => undefined);
      expect(result).toEqual({ doc: { n: 1 }, changed: false });
      expect((await store.get('same/doc'))?.version).toBe(v);
    });
  });
}
