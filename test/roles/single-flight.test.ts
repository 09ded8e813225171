/**
 * Single-flight with streaming fan-out against a real HTTP upstream behind the fault proxy: one
 * upstream fetch for many concurrent misses, bytes delivered as they arrive (also to waiters that
 * join mid-transfer), publication only of verified bytes, and failures that reach every waiter.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { IndexCounters } from '../../registry/src/observe/counters.js';
import { BlobFlights, type Delivery, type FlightOutcome } from '../../registry/src/roles/single-flight.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { DigestMismatchError } from '../../registry/src/storage/types.js';
import { tempDir } from '../support/velodex.js';
import { consume, starter, type Meta } from './flight-support.js';
import { generatedDigest, proxiedOrigin } from './origin.js';

const MiB = 1024 * 1024;
const BIG = 50 * MiB;
const SMALL = 6 * MiB;

const up = proxiedOrigin({ '/files/big': BIG, '/files/corrupt': SMALL, '/files/drop': SMALL, '/files/paused': SMALL, '/files/again': SMALL });

async function setup() {
  const root = tempDir('velodex-flight-');
  const store = new FsBlobStore(root);
  await store.init();
  // The store's staging folder: a flight stages there, and leaves nothing behind.
  const spoolDir = join(root, 'staging');
  const counters = new IndexCounters('cache');
  const outcomes: FlightOutcome[] = [];
  let notify: (() => void) | undefined;
  const flights = new BlobFlights({
    store,
    counters,
    onOutcome: (o) => {
      outcomes.push(o);
      notify?.();
    },
  });
  /** Resolves when the flight has been reported (after its spool was disposed). */
  const reported = (n: number) =>
    new Promise<void>((resolve) => {
      if (outcomes.length >= n) return resolve();
      notify = () => {
        if (outcomes.length >= n) resolve();
      };
    });
  return { store, spoolDir, counters, outcomes, flights, reported };
}

describe('BlobFlights', () => {
  it('ten concurrent misses for a 50 MiB file share one upstream fetch, late joiners included, and the blob is published', async () => {
    const { store, flights, outcomes, reported, counters } = await setup();
    const digest = generatedDigest('/files/big', BIG);
    // Hold the transfer after 8 MiB, so the first waiters are provably mid-transfer when the rest join.
    up.proxy.on('/files/big', { kind: 'stall', afterBytes: 8 * MiB }, 1);

    const early = await Promise.all(Array.from({ length: 5 }, () => flights.open('sha256:big', starter(up, '/files/big', digest))));
    const earlyReads = early.map((d) => consume(d!.stream));
    await up.proxy.stalled(1);
    // Bytes reach the waiters as they arrive: the upstream is stalled at 8 MiB of 50 (the last
    // byte so far is held back until the digest verifies).
    await vi.waitFor(() => expect(Math.min(...earlyReads.map((r) => r.state.received))).toBe(8 * MiB - 1), { timeout: 60_000 });

    const late = await Promise.all(Array.from({ length: 5 }, () => flights.open('sha256:big', starter(up, '/files/big', digest))));
    expect(late.every((d) => d !== null)).toBe(true);
    expect(late[0]!.size).toBe(BIG);
    expect(late[0]!.meta.contentType).toBe('application/octet-stream');
    const lateReads = late.map((d) => consume(d!.stream));
    up.proxy.release();

    const results = await Promise.all([...earlyReads, ...lateReads].map((r) => r.result));
    for (const r of results) expect(r).toEqual({ digest, size: BIG });
    expect(up.proxy.count('/files/big')).toBe(1);

    await reported(1);
    expect(outcomes).toEqual([{ kind: 'published', key: 'sha256:big', info: { digest, size: BIG } }]);
    expect(await store.stat(digest)).toEqual({ digest, size: BIG, modifiedMs: expect.any(Number) });
    expect(flights.size).toBe(0);
    expect(counters.snapshot()).toMatchObject({ rejected: 0, upstream_errors: 0 });

    // A miss that raced the publication finds the blob on the flight's recheck: no second fetch.
    const again = await flights.open('sha256:big', starter(up, '/files/big', digest), { recheck: async () => (await store.stat(digest)) !== null });
    expect(again).toBeNull();
    expect(up.proxy.count('/files/big')).toBe(1);
  });

  it('asks the store again only when a flight of the key may have ended since the caller looked', async () => {
    const { store, flights, reported } = await setup();
    const digest = generatedDigest('/files/again', SMALL);
    let rechecks = 0;
    const recheck = async () => {
      rechecks += 1;
      return (await store.stat(digest)) !== null;
    };
    // No flight of the key ever ended: nothing can have been published since the lookup.
    const lookedAt = Date.now();
    const first = (await flights.open('again', starter(up, '/files/again', digest), { recheck, since: lookedAt }))!;
    expect(rechecks).toBe(0);
    expect(await consume(first.stream).result).toEqual({ digest, size: SMALL });
    await reported(1);
    // A caller that looked before that flight ended may have missed it: the store is asked, and
    // has it. No second fetch.
    expect(await flights.open('again', starter(up, '/files/again', digest), { recheck, since: lookedAt })).toBeNull();
    expect(rechecks).toBe(1);
    await reported(2);
    // Without `since` the store is always asked.
    expect(await flights.open('again', starter(up, '/files/again', digest), { recheck })).toBeNull();
    expect(rechecks).toBe(2);
    expect(up.proxy.count('/files/again')).toBe(1);
  });

  it('a waiter that does not read never makes the leader buffer or wait', async () => {
    const { flights, reported, outcomes } = await setup();
    const digest = generatedDigest('/files/paused', SMALL);
    const idle = (await flights.open('paused', starter(up, '/files/paused', digest)))!;
    const reader = (await flights.open('paused', starter(up, '/files/paused', digest)))!;
    // A client that goes away does not disturb the transfer for the others.
    const quitter = (await flights.open('paused', starter(up, '/files/paused', digest)))!;
    quitter.stream.destroy();
    const read = consume(reader.stream);
    expect(await read.result).toEqual({ digest, size: SMALL });
    // The transfer finished and was published while one waiter had read nothing at all...
    await reported(1);
    expect(outcomes[0]?.kind).toBe('published');
    // ...and that waiter holds at most one read chunk plus its stream buffer, not the file.
    expect(idle.stream.readableLength).toBeLessThanOrEqual(128 * 1024);
    expect(await consume(idle.stream).result).toEqual({ digest, size: SMALL });
  });

  it('a corrupted transfer fails every waiter, publishes nothing, counts rejected, and the next miss fetches again', async () => {
    const { store, flights, outcomes, reported, counters, spoolDir } = await setup();
    const digest = generatedDigest('/files/corrupt', SMALL);
    up.proxy.on('/files/corrupt', { kind: 'corrupt' }, 1);
    const before = up.proxy.count('/files/corrupt');

    const waiters = await Promise.all(Array.from({ length: 4 }, () => flights.open('corrupt', starter(up, '/files/corrupt', digest))));
    const reads = waiters.map((d) => consume(d!.stream));
    const errors = await Promise.all(reads.map((r) => r.result.then(() => null, (e: unknown) => e)));
    for (const e of errors) expect(e).toBeInstanceOf(DigestMismatchError);
    // No waiter ever holds the full length: a client trusting Content-Length sees a short body.
    for (const r of reads) expect(r.state.received).toBeLessThan(SMALL);
    expect(up.proxy.count('/files/corrupt')).toBe(before + 1);

    await reported(1);
    expect(outcomes[0]?.kind).toBe('rejected');
    expect(counters.get('rejected')).toBe(1);
    expect(await store.stat(digest)).toBeNull();
    expect(readdirSync(spoolDir)).toEqual([]);

    const retry = (await flights.open('corrupt', starter(up, '/files/corrupt', digest)))!;
    expect(await consume(retry.stream).result).toEqual({ digest, size: SMALL });
    expect(up.proxy.count('/files/corrupt')).toBe(before + 2);
    await reported(2);
    expect(outcomes[1]?.kind).toBe('published');
    expect(await store.stat(digest)).not.toBeNull();
  });

  it('a connection dropped mid-transfer fails every waiter and publishes nothing (upstream_error)', async () => {
    const { store, flights, outcomes, reported, counters, spoolDir } = await setup();
    const digest = generatedDigest('/files/drop', SMALL);
    up.proxy.on('/files/drop', { kind: 'drop', afterBytes: 3 * MiB }, 1);

    const waiters = await Promise.all(Array.from({ length: 3 }, () => flights.open('drop', starter(up, '/files/drop'))));
    const results = await Promise.all(waiters.map((d) => consume(d!.stream).result.then(() => null, (e: unknown) => e)));
    for (const e of results) {
      expect(e).toBeInstanceOf(Error);
      expect(String(e)).toMatch(/upstream/);
    }
    await reported(1);
    expect(outcomes[0]?.kind).toBe('upstream_error');
    expect(counters.get('upstream_errors')).toBe(1);
    expect(counters.get('rejected')).toBe(0);
    expect(await store.stat(digest)).toBeNull();
    expect(readdirSync(spoolDir)).toEqual([]);
  });

  it('a start that fails rejects every waiter with its error and leaves no flight behind', async () => {
    const { flights, reported, outcomes } = await setup();
    const opened: Array<Promise<Delivery<Meta> | null>> = Array.from({ length: 3 }, () => flights.open('missing', starter(up, '/files/none')));
    for (const p of opened) await expect(p).rejects.toThrow('upstream answered 404');
    await reported(1);
    expect(outcomes[0]?.kind).toBe('not_started');
    expect(flights.size).toBe(0);
  });
});
