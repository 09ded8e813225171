/**
 * When flights ended (registry/src/storage/recent-ends.ts): what lets a flight skip asking the store
 * again. A key no flight ended for since a lookup began needs no recheck; one that ended at or
 * after it (or within the clock margin before it) does; and once the table has forgotten ends,
 * every lookup that began before the newest forgotten one is answered "maybe".
 */
import { describe, expect, it } from 'vitest';
import { RecentEnds } from '../../registry/src/storage/recent-ends.js';

describe('RecentEnds', () => {
  it('answers whether a flight of the key may have ended since a lookup began', () => {
    const ends = new RecentEnds();
    const t = 1_000_000;
    expect(ends.endedSince('a', t)).toBe(false);
    ends.ended('a', t + 5);
    expect(ends.endedSince('a', t)).toBe(true);
    // Within the margin before the lookup: a clock step could have reordered them.
    expect(ends.endedSince('a', t + 900)).toBe(true);
    expect(ends.endedSince('a', t + 5_000)).toBe(false);
    expect(ends.endedSince('b', t)).toBe(false);
  });

  it('answers "maybe" for lookups older than an end it had to forget', () => {
    const ends = new RecentEnds(2);
    const t = 1_000_000;
    ends.ended('a', t);
    ends.ended('b', t + 10_000);
    ends.ended('c', t + 20_000);
    // `a` was forgotten: a lookup that began before its end may have missed it.
    expect(ends.endedSince('a', t - 100)).toBe(true);
    expect(ends.endedSince('never', t - 100)).toBe(true);
    // A lookup after the forgotten end: only the remembered ends count.
    expect(ends.endedSince('never', t + 5_000)).toBe(false);
    expect(ends.endedSince('c', t + 15_000)).toBe(true);
  });
});
