/** The byte-bounded LRU behind the manifest bytes and the archive listings caches. */
import { describe, expect, it } from 'vitest';
import { ByteLru } from '../../registry/src/storage/byte-lru.js';

const bytes = (n: number) => Buffer.alloc(n);

describe('ByteLru', () => {
  it('evicts the least recently used entries once the bytes exceed the budget', () => {
    const lru = new ByteLru<Buffer>(100, (b) => b.length);
    lru.set('a', bytes(40));
    lru.set('b', bytes(40));
    expect(lru.bytes).toBe(80);
    lru.set('c', bytes(40)); // 120 > 100: a, the oldest, goes
    expect([lru.has('a'), lru.has('b'), lru.has('c')]).toEqual([false, true, true]);
    expect(lru.bytes).toBe(80);
    lru.set('d', bytes(90)); // b and c both go
    expect([lru.has('b'), lru.has('c'), lru.has('d')]).toEqual([false, false, true]);
    expect(lru.bytes).toBe(90);
    expect(lru.size).toBe(1);
  });

  it('counts a read as use: the entry read last is kept', () => {
    const lru = new ByteLru<Buffer>(100, (b) => b.length);
    lru.set('a', bytes(30));
    lru.set('b', bytes(30));
    lru.set('c', bytes(30));
    expect(lru.get('a')?.length).toBe(30);
    lru.set('d', bytes(30)); // b is now the least recently used
    expect([lru.has('a'), lru.has('b'), lru.has('c'), lru.has('d')]).toEqual([true, false, true, true]);
    expect(lru.get('b')).toBeUndefined();
  });

  it('replaces a key without counting it twice, drops deleted entries, and never keeps a value above the budget', () => {
    const lru = new ByteLru<string>(10, (s) => s.length);
    lru.set('k', 'aaaa');
    lru.set('k', 'bbbbbb');
    expect(lru.bytes).toBe(6);
    expect(lru.get('k')).toBe('bbbbbb');
    lru.set('huge', 'x'.repeat(11));
    expect(lru.has('huge')).toBe(false);
    expect(lru.get('k')).toBe('bbbbbb');
    expect(lru.delete('k')).toBe(true);
    expect(lru.delete('k')).toBe(false);
    expect(lru.bytes).toBe(0);
  });
});
