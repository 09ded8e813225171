/**
 * `[storage] read_cache_ms` (storage/recent-reads.ts) over a real store: two MetaStores on one
 * folder stand for two processes, one of them with the bound. A request read (`recent`) may be
 * answered from memory while the copy is younger than the bound, never older; any other read, and
 * every write through the process, goes to the store; compare-and-swap stays exact.
 */
import { describe, expect, it } from 'vitest';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { ProcessKeyLocks } from '../../registry/src/storage/key-locks.js';
import { RecentReads } from '../../registry/src/storage/recent-reads.js';
import { REQUEST_READ } from '../../registry/src/storage/types.js';
import { updateDoc } from '../../registry/src/storage/update.js';
import { tempDir } from '../support/velodex.js';

interface Doc {
  n: number;
}

const BOUND = 1000;

async function pair() {
  const dir = tempDir('velodex-recent-');
  // Shared locks: the fs store's compare-and-swap is exact among the workers of one server.
  const locks = new ProcessKeyLocks();
  const other = new FsMetaStore(dir, locks);
  const inner = new FsMetaStore(dir, locks);
  await other.init();
  await inner.init();
  let clock = 0;
  const gets: string[] = [];
  const counted = {
    get: <T,>(key: string) => {
      gets.push(key);
      return inner.get<T>(key);
    },
    put: inner.put.bind(inner),
    delete: inner.delete.bind(inner),
    list: inner.list.bind(inner),
  };
  const mine = new RecentReads(counted, BOUND, () => clock);
  return { other, mine, gets, advance: (ms: number) => (clock += ms) };
}

describe('recent reads (read_cache_ms)', () => {
  it('answers a request read from memory within the bound, and from the store after it', async () => {
    const { other, mine, gets, advance } = await pair();
    await other.put<Doc>('t/doc', { n: 1 });
    expect((await mine.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(1);
    await other.put<Doc>('t/doc', { n: 2 });
    advance(BOUND - 1);
    // Another process's change is allowed to be unseen for the bound, no longer.
    expect((await mine.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(1);
    expect(gets).toHaveLength(1);
    advance(1);
    expect((await mine.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
    expect(gets).toHaveLength(2);
  });

  it('never answers a read without the option from memory', async () => {
    const { other, mine } = await pair();
    await other.put<Doc>('t/doc', { n: 1 });
    await mine.get<Doc>('t/doc', REQUEST_READ);
    await other.put<Doc>('t/doc', { n: 2 });
    expect((await mine.get<Doc>('t/doc'))?.doc.n).toBe(2);
    // And that read refreshed the copy for the request reads.
    expect((await mine.get<Doc>('t/doc', REQUEST_READ))?.doc.n).toBe(2);
  });

  it('remembers an absent document for the bound, and sees its own writes and deletes at once', async () => {
    const { other, mine } = await pair();
    expect(await mine.get<Doc>('t/late', REQUEST_READ)).toBeNull();
    await other.put<Doc>('t/late', { n: 1 });
    expect(await mine.get<Doc>('t/late', REQUEST_READ)).toBeNull();
    const version = await mine.put<Doc>('t/late', { n: 5 }, (await mine.get<Doc>('t/late'))?.version);
    expect(await mine.get<Doc>('t/late', REQUEST_READ)).toEqual({ doc: { n: 5 }, version });
    await mine.delete('t/late');
    expect(await mine.get<Doc>('t/late', REQUEST_READ)).toBeNull();
  });

  it('keeps compare-and-swap exact: updates through both processes lose nothing', async () => {
    const { other, mine } = await pair();
    await mine.get<Doc>('t/count', REQUEST_READ);
    await Promise.all(Array.from({ length: 30 }, (_, i) => updateDoc<Doc>(i % 2 ? mine : other, 't/count', (cur) => ({ n: (cur?.n ?? 0) + 1 }))));
    expect((await other.get<Doc>('t/count'))?.doc.n).toBe(30);
    expect((await mine.get<Doc>('t/count', REQUEST_READ))?.doc.n).toBe(30);
  });

  it('keeps no copy from a read that a write through this process overtook', async () => {
    const { other, mine } = await pair();
    await other.put<Doc>('t/race', { n: 1 });
    // The read starts, a write through this process lands while it is in flight.
    const reading = mine.get<Doc>('t/race');
    await mine.put<Doc>('t/race', { n: 2 });
    await reading;
    expect((await mine.get<Doc>('t/race', REQUEST_READ))?.doc.n).toBe(2);
  });

  it('hands out frozen documents, whole versions only', async () => {
    const { other, mine } = await pair();
    await other.put('t/frozen', { list: [1, 2] });
    const found = await mine.get<{ list: number[] }>('t/frozen', REQUEST_READ);
    expect(Object.isFrozen(found?.doc.list)).toBe(true);
    expect(() => found?.doc.list.push(3)).toThrow(TypeError);
  });
});
