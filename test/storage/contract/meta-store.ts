/**
 * The contract every MetaStore backend keeps, run once per backend by `describeMetaStore`. Only
 * the public interface is used: what one backend stores on disk or in a bucket is its own affair.
 */
import { describe, expect, it } from 'vitest';
import { ConflictError, type MetaStore } from '../../../registry/src/storage/types.js';
import { updateDoc } from '../../../registry/src/storage/update.js';

/** A fresh, empty store for each test. */
export type MakeMetaStore = () => Promise<MetaStore>;

async function keysOf(store: MetaStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const k of store.list(prefix)) keys.push(k);
  return keys.sort();
}

export function describeMetaStore(name: string, make: MakeMetaStore): void {
  describe(`MetaStore contract: ${name}`, () => {
    it('reads back what was put, with the version put returned', async () => {
      const store = await make();
      expect(await store.get('docs/missing')).toBeNull();
      const v1 = await store.put('docs/one', { n: 1, list: ['a'] }, null);
      expect(await store.get('docs/one')).toEqual({ doc: { n: 1, list: ['a'] }, version: v1 });
      const v2 = await store.put('docs/one', { n: 2, list: ['a', 'b'] });
      expect(v2).not.toBe(v1);
      expect(await store.get('docs/one')).toEqual({ doc: { n: 2, list: ['a', 'b'] }, version: v2 });
    });

    it('creates only when absent and replaces only the version it read', async () => {
      const store = await make();
      const v1 = await store.put('cas/doc', { n: 1 }, null);
      await expect(store.put('cas/doc', { n: 9 }, null)).rejects.toBeInstanceOf(ConflictError);
      const v2 = await store.put('cas/doc', { n: 2 }, v1);
      await expect(store.put('cas/doc', { n: 9 }, v1)).rejects.toBeInstanceOf(ConflictError);
      expect(await store.get('cas/doc')).toEqual({ doc: { n: 2 }, version: v2 });
      // A version never matches a key that does not exist.
      await expect(store.put('cas/other', { n: 1 }, v2)).rejects.toBeInstanceOf(ConflictError);
      expect(await store.get('cas/other')).toBeNull();
    });

    it('deletes, conditionally or not, and creates again after a delete', async () => {
      const store = await make();
      const v1 = await store.put('del/doc', { n: 1 }, null);
      const v2 = await store.put('del/doc', { n: 2 }, v1);
      await expect(store.delete('del/doc', v1)).rejects.toBeInstanceOf(ConflictError);
      expect((await store.get('del/doc'))?.doc).toEqual({ n: 2 });
      expect(await store.delete('del/doc', v2)).toBe(true);
      expect(await store.get('del/doc')).toBeNull();
      expect(await store.delete('del/doc', v2)).toBe(false);
      expect(await store.delete('del/doc')).toBe(false);
      // Absent again: a create succeeds once, and a second create conflicts.
      const v3 = await store.put('del/doc', { n: 3 }, null);
      await expect(store.put('del/doc', { n: 4 }, null)).rejects.toBeInstanceOf(ConflictError);
      // A stale version from before the delete does not match the new document.
      await expect(store.put('del/doc', { n: 4 }, v2)).rejects.toBeInstanceOf(ConflictError);
      expect(await store.get('del/doc')).toEqual({ doc: { n: 3 }, version: v3 });
      expect(await store.delete('del/doc')).toBe(true);
      expect(await store.get('del/doc')).toBeNull();
      await store.put('del/doc', { n: 5 }, null);
      expect((await store.get('del/doc'))?.doc).toEqual({ n: 5 });
    });

    it('lists the keys below a folder, deleted ones excluded', async () => {
      const store = await make();
      await store.put('p/x/one', 1);
      await store.put('p/x/two', 2);
      await store.put('p/x/deep/three', 3);
      await store.put('p/xy/sibling', 4);
      await store.put('p/y/other', 5);
      const gone = await store.put('p/x/gone', 6);
      await store.delete('p/x/gone', gone);
      await store.put('p/x/gone-too', 7);
      await store.delete('p/x/gone-too');
      expect(await keysOf(store, 'p/x')).toEqual(['p/x/deep/three', 'p/x/one', 'p/x/two']);
      expect(await keysOf(store, 'p/x/deep')).toEqual(['p/x/deep/three']);
      expect(await keysOf(store, 'empty')).toEqual([]);
    });

    it('lists more keys than one listing page holds', async () => {
      const store = await make();
      const keys = Array.from({ length: 1005 }, (_, i) => `many/k${String(i).padStart(4, '0')}`);
      for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((k) => store.put(k, { k })));
      expect(await keysOf(store, 'many')).toEqual(keys);
    });

    it('loses no update among 50 concurrent read-modify-writes', async () => {
      const store = await make();
      await Promise.all(
        Array.from({ length: 50 }, (_, i) => updateDoc<{ seen: number[] }>(store, 'counter/doc', (cur) => ({ seen: [...(cur?.seen ?? []), i] }))),
      );
      const found = await store.get<{ seen: number[] }>('counter/doc');
      expect(found?.doc.seen.slice().sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    });

    it('keeps documents under odd keys apart, a key beside a folder of the same name included', async () => {
      const store = await make();
      const odd = ['odd/a+b', 'odd/a~b', 'odd/1.0.0-rc_1+local', 'odd/A..B', 'odd/_x', 'odd/x.json', 'odd/dir', 'odd/dir/child', 'odd/dir/child/leaf', 'odd/UPPER', 'odd/upper'];
      for (const k of odd) await store.put(k, { k }, null);
      for (const k of odd) expect((await store.get<{ k: string }>(k))?.doc).toEqual({ k });
      expect(await keysOf(store, 'odd')).toEqual([...odd].sort());
      expect(await keysOf(store, 'odd/dir')).toEqual(['odd/dir/child', 'odd/dir/child/leaf']);
    });

    it('stores any JSON value, falsy and non-ASCII ones included', async () => {
      const store = await make();
      const values: unknown[] = [null, 0, false, '', [], {}, 'ünïcödé ✓ 日本', { nested: { deep: [1, 'two', { three: null }] } }];
      for (const [i, v] of values.entries()) {
        const version = await store.put(`values/v${i}`, v, null);
        expect(await store.get(`values/v${i}`)).toEqual({ doc: v, version });
      }
    });

    it('refuses unsafe keys', async () => {
      const store = await make();
      for (const bad of ['p/../escape', '../up', 'a//b', 'a/./b', '/abs', 'trailing/', 'sp ace', 'p/%2e%2e']) {
        await expect(store.put(bad, 1)).rejects.toThrow(/unsafe metadata key/);
        await expect(store.get(bad)).rejects.toThrow(/unsafe metadata key/);
      }
    });
  });
}
