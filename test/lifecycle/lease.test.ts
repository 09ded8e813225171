/**
 * The collector's lease in the MetaStore (lifecycle/lease.ts), over the real fs store with a
 * clock the test moves: one of two contenders gets it, the other sees who holds it; the holder
 * renews it; once it expires another takes it over, and the old holder learns so at its next
 * renewal and cannot release the new holder's lease.
 */
import { describe, expect, it } from 'vitest';
import { Lease } from '../../registry/src/lifecycle/lease.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { tempDir } from '../support/velodex.js';

async function store() {
  const meta = new FsMetaStore(tempDir('velodex-lease-'));
  await meta.init();
  return meta;
}

describe('Lease', () => {
  it('goes to one of two contenders at once; the other is told who holds it', async () => {
    const meta = await store();
    let now = 1_000_000;
    const one = new Lease(meta, 'gc', 'one', 10_000, () => now);
    const two = new Lease(meta, 'gc', 'two', 10_000, () => now);
    const [a, b] = await Promise.all([one.acquire(), two.acquire()]);
    expect([a, b].filter((x) => x === null)).toHaveLength(1);
    const [winner, loser] = a === null ? [one, two] : [two, one];
    expect(winner.held).toBe(true);
    expect(loser.held).toBe(false);
    expect((a ?? b)?.owner).toBe(winner.owner);
    expect((await meta.get<{ owner: string }>('lifecycle/leases/gc'))?.doc.owner).toBe(winner.owner);
    now += 5_000;
    expect(await loser.acquire()).toMatchObject({ owner: winner.owner });
  });

  it('is renewed by its holder, so it does not expire while the work goes on', async () => {
    const meta = await store();
    let now = 0;
    const holder = new Lease(meta, 'gc', 'holder', 10_000, () => now);
    const other = new Lease(meta, 'gc', 'other', 10_000, () => now);
    expect(await holder.acquire()).toBeNull();
    for (let i = 0; i < 5; i++) {
      now += 6_000;
      expect(await holder.renew()).toBe(true);
      expect(await other.acquire()).toMatchObject({ owner: 'holder' });
    }
    await holder.release();
    expect(await other.acquire()).toBeNull();
  });

  it('is taken over once expired (a killed holder); the old holder loses it and cannot release it', async () => {
    const meta = await store();
    let now = 0;
    const killed = new Lease(meta, 'gc', 'killed', 10_000, () => now);
    const next = new Lease(meta, 'gc', 'next', 10_000, () => now);
    expect(await killed.acquire()).toBeNull();
    now += 9_999;
    expect(await next.acquire()).toMatchObject({ owner: 'killed' });
    now += 2;
    expect(await next.acquire()).toBeNull();
    expect(await killed.renew()).toBe(false);
    expect(killed.held).toBe(false);
    await killed.release();
    expect((await next.current())?.owner).toBe('next');
    expect(await next.renew()).toBe(true);
  });
});
