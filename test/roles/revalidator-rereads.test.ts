/**
 * When a refresh reads the stored copy again (registry/src/roles/revalidator.ts): only when
 * another refresh of the key ended since the caller read it, in this process or (through the
 * server's locks) in another worker; a caller that cannot say when it read the copy always reads
 * it again. A copy in memory stands in for the store; the counts are of its reads and of the
 * questions to the upstream.
 */
import { describe, expect, it } from 'vitest';
import { Revalidator, type CachedCopy } from '../../registry/src/roles/revalidator.js';
import { ProcessKeyLocks } from '../../registry/src/storage/key-locks.js';

interface Doc {
  confirmedAt: number;
}

/** A stored copy fresh for 60 s after each confirmation; the upstream always confirms it. */
function copyIn(store: { doc: Doc | null }) {
  const counts = { stored: 0, asked: 0 };
  const copy: CachedCopy<Doc, 'same'> = {
    stored: async () => {
      counts.stored += 1;
      return store.doc;
    },
    isFresh: (doc, now) => now < doc.confirmedAt + 60_000,
    ask: async () => {
      counts.asked += 1;
      return 'same';
    },
    keep: async () => {
      store.doc = { confirmedAt: Date.now() };
      return { doc: store.doc, same: true };
    },
    gone: () => false,
    retain: async (current) => ({ doc: current, marked: false }),
  };
  return { copy, counts };
}

describe.each([
  ['one process', () => new Revalidator<Doc>()],
  ['locks shared by the workers', () => new Revalidator<Doc>({ locks: new ProcessKeyLocks() })],
])('a refresh with %s', (_, make) => {
  it('uses the copy the caller read when no other refresh of the key ended since, and reads it again when one did', async () => {
    const revalidator = make();
    const store: { doc: Doc | null } = { doc: { confirmedAt: 0 } };
    const { copy, counts } = copyIn(store);

    // A caller read an expired copy just now: the refresh asks the upstream without reading it again.
    const lookedAt = Date.now();
    const stale = store.doc;
    expect((await revalidator.read('k', copy, { stored: Promise.resolve(stale), storedAt: lookedAt }))?.served).toBe('revalidated');
    expect(counts).toEqual({ stored: 0, asked: 1 });

    // Another caller that read the same expired copy before that refresh ended: the copy is read
    // again, found fresh, and the upstream is not asked twice.
    expect((await revalidator.read('k', copy, { stored: Promise.resolve(stale), storedAt: lookedAt }))?.served).toBe('fresh');
    expect(counts).toEqual({ stored: 1, asked: 1 });

    // A caller that does not say when it read the copy: read again.
    expect((await revalidator.read('k', copy, { stored: Promise.resolve(stale) }))?.served).toBe('fresh');
    expect(counts).toEqual({ stored: 2, asked: 1 });

    // Another key, read by the revalidator itself: one read, then the upstream.
    store.doc = { confirmedAt: 0 };
    expect((await revalidator.read('other', copy))?.served).toBe('revalidated');
    expect(counts).toEqual({ stored: 3, asked: 2 });
  });
});
