/**
 * One runner at a time (lifecycle/exclusive.ts) and the retention schedule on top of it
 * (lifecycle/retention-schedule.ts), over a real MetaStore: a second runner is told busy while
 * the lease is live (also past its first expiry, because the holder renews it), a lease left by a
 * dead runner is taken over once it has expired, a released lease is free at once; and of two
 * processes keeping the same schedule only one runs each period.
 */
import { describe, expect, it } from 'vitest';
import { MetaStoreExclusive } from '../../registry/src/lifecycle/exclusive.js';
import type { RetentionReport, RetentionRunner } from '../../registry/src/lifecycle/retention.js';
import { scheduleRetention } from '../../registry/src/lifecycle/retention-schedule.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { tempDir } from '../support/temp-dirs.js';

async function metaStore(): Promise<FsMetaStore> {
  const meta = new FsMetaStore(tempDir('velodex-exclusive-'));
  await meta.init();
  return meta;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('runExclusive', () => {
  it('runs one runner at a time, renews while it runs, and frees the lease when done', async () => {
    const meta = await metaStore();
    const a = new MetaStoreExclusive(meta, { leaseMs: 300 });
    const b = new MetaStoreExclusive(meta, { leaseMs: 300 });
    let release!: () => void;
    const running = a.runExclusive('job', () => new Promise<string>((r) => (release = () => r('done'))));
    await sleep(50);
    expect(await b.runExclusive('job', async () => 'b ran')).toBe('busy');
    // Past the first lease length: renewed, so still busy.
    await sleep(700);
    expect(await b.runExclusive('job', async () => 'b ran')).toBe('busy');
    // Another name is another lease.
    expect(await b.runExclusive('other', async () => 'other ran')).toBe('other ran');
    release();
    expect(await running).toBe('done');
    expect(await b.runExclusive('job', async () => 'b ran')).toBe('b ran');
  });

  it('takes over a lease its runner left behind once it has expired, not before', async () => {
    const meta = await metaStore();
    const left = { owner: 'dead-host:1:abcd', takenAt: Date.now() };
    await meta.put('lifecycle/leases/job', { ...left, expiresAt: Date.now() + 60_000 });
    const x = new MetaStoreExclusive(meta);
    expect(await x.runExclusive('job', async () => 'ran')).toBe('busy');
    const found = await meta.get('lifecycle/leases/job');
    await meta.put('lifecycle/leases/job', { ...left, expiresAt: Date.now() - 1 }, found!.version);
    expect(await x.runExclusive('job', async () => 'ran')).toBe('ran');
  });

  it('frees the lease when the work throws', async () => {
    const meta = await metaStore();
    const x = new MetaStoreExclusive(meta);
    await expect(x.runExclusive('job', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await x.runExclusive('job', async () => 'ran')).toBe('ran');
  });
});

describe('scheduleRetention', () => {
  it('runs once per period among processes that keep the same schedule', async () => {
    const meta = await metaStore();
    let runs = 0;
    const exclusive = new MetaStoreExclusive(meta);
    const report = (): RetentionReport => ({ dryRun: false, startedAt: new Date().toISOString(), finishedAt: new Date().toISOString(), indexes: [] });
    // The schedule needs only `run`; each "process" runs under the shared lease.
    const runner = {
      run: () =>
        exclusive.runExclusive('retention', async () => {
          runs++;
          await sleep(100);
          return report();
        }),
    } as unknown as RetentionRunner;
    const log = { warn: () => undefined, debug: () => undefined };
    const stops = [scheduleRetention(runner, meta, 2, log), scheduleRetention(runner, meta, 2, log)];
    // Both look at 2 s: one runs, the other finds the lease taken or the fresh finish time.
    await sleep(3_000);
    for (const stop of stops) stop();
    expect(runs).toBe(1);
    expect((await meta.get<{ finishedAt: number }>('lifecycle/retention/last'))?.doc.finishedAt).toBeGreaterThan(0);
  });
});
