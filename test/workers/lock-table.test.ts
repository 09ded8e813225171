/**
 * The primary's per-key locks (registry/src/workers/lock-table.ts): one holder per key at a time,
 * waiters granted in arrival order, and a worker that dies lets go of everything it held or waited
 * for, so a killed worker never keeps a key locked. A property test drives random schedules of
 * requests, releases and deaths against a model.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LockTable, type Holder } from '../../registry/src/workers/lock-table.js';

describe('LockTable', () => {
  it('grants one holder per key, then the next in arrival order', () => {
    const t = new LockTable();
    expect(t.request('a', { worker: 1, id: 1 })).toBe(true);
    expect(t.request('a', { worker: 2, id: 1 })).toBe(false);
    expect(t.request('a', { worker: 1, id: 2 })).toBe(false);
    expect(t.request('b', { worker: 2, id: 2 })).toBe(true);
    expect(t.release({ worker: 1, id: 1 })).toEqual({ worker: 2, id: 1 });
    expect(t.release({ worker: 2, id: 1 })).toEqual({ worker: 1, id: 2 });
    expect(t.release({ worker: 1, id: 2 })).toBeUndefined();
    expect(t.release({ worker: 2, id: 2 })).toBeUndefined();
    expect(t.size).toBe(0);
  });

  it('tells a holder whether the key was let go since it last looked at what the lock guards', () => {
    const t = new LockTable();
    const lookedAt = Date.now();
    const first = { worker: 1, id: 1, since: lookedAt };
    expect(t.request('a', first)).toBe(true);
    expect(t.releasedSince(first)).toBe(false);
    // A second worker looked at the same time and waits: the first one's release is news to it.
    const second = { worker: 2, id: 1, since: lookedAt };
    expect(t.request('a', second)).toBe(false);
    expect(t.release(first)).toEqual(second);
    expect(t.releasedSince(second)).toBe(true);
    t.release(second);
    // Without a `since`, always: nothing is known of what it saw.
    const blind = { worker: 1, id: 2 };
    expect(t.request('b', blind)).toBe(true);
    expect(t.releasedSince(blind)).toBe(true);
    t.release(blind);
    // Another key's release is not news for this one.
    const other = { worker: 2, id: 2, since: lookedAt };
    expect(t.request('c', other)).toBe(true);
    expect(t.releasedSince(other)).toBe(false);
  });

  it('a dead worker lets go of what it held and leaves the queues it waited in', () => {
    const t = new LockTable();
    t.request('a', { worker: 1, id: 1 });
    t.request('a', { worker: 1, id: 2 });
    t.request('a', { worker: 2, id: 1 });
    t.request('b', { worker: 2, id: 2 });
    t.request('b', { worker: 1, id: 3 });
    expect(t.dropWorker(1)).toEqual([{ worker: 2, id: 1 }]);
    expect(t.release({ worker: 2, id: 2 })).toBeUndefined();
    expect(t.release({ worker: 2, id: 1 })).toBeUndefined();
    expect(t.size).toBe(0);
  });

  it('never has two holders of a key, and every waiter is granted once its turn comes (random schedules)', () => {
    type Op = { kind: 'request'; worker: number; key: string } | { kind: 'release'; pick: number } | { kind: 'die'; worker: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant('request' as const), worker: fc.integer({ min: 1, max: 3 }), key: fc.constantFrom('x', 'y') }),
      fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant('die' as const), worker: fc.integer({ min: 1, max: 3 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const t = new LockTable();
        const holding = new Map<string, Holder>();
        const waiting = new Map<string, Holder[]>();
        const keyOf = new Map<string, string>();
        let nextId = 1;
        const grant = (h: Holder | undefined) => {
          if (!h) return;
          const key = keyOf.get(`${h.worker}:${h.id}`)!;
          expect(holding.has(key)).toBe(false);
          // The model's queue head is the one granted.
          const q = waiting.get(key)!;
          expect(q[0]).toEqual(h);
          q.shift();
          holding.set(key, h);
        };
        for (const o of ops) {
          if (o.kind === 'request') {
            const h = { worker: o.worker, id: nextId++ };
            keyOf.set(`${h.worker}:${h.id}`, o.key);
            if (t.request(o.key, h)) {
              expect(holding.has(o.key)).toBe(false);
              holding.set(o.key, h);
            } else {
              expect(holding.has(o.key)).toBe(true);
              waiting.set(o.key, [...(waiting.get(o.key) ?? []), h]);
            }
          } else if (o.kind === 'release') {
            const held = [...holding.entries()];
            if (held.length === 0) continue;
            const [key, h] = held[o.pick % held.length]!;
            holding.delete(key);
            grant(t.release(h));
          } else {
            for (const [key, h] of [...holding]) if (h.worker === o.worker) holding.delete(key);
            for (const [key, q] of waiting) waiting.set(key, q.filter((h) => h.worker !== o.worker));
            for (const h of t.dropWorker(o.worker)) grant(h);
          }
          // A key nobody holds has nobody waiting for it.
          for (const [key, q] of waiting) if (!holding.has(key)) expect(q).toEqual([]);
        }
      }),
    );
  });
});
