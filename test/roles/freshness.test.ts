/**
 * Freshness of cached documents and the read-through cache against a real HTTP upstream behind
 * the fault proxy. A fake clock moves time; nothing here depends on how long anything takes.
 */
import { describe, expect, it } from 'vitest';
import { answerNeutral } from '../../registry/src/ecosystem/answers.js';
import { JSON_ANSWERS } from '../../registry/src/ecosystem/json-answers.js';
import { OCI_ANSWERS } from '../../registry/src/oci/handlers/answers.js';
import { UpstreamError as UpstreamUnavailableError } from '../../registry/src/roles/upstream-error.js';
import { SlotWaitTimeoutError } from '../../registry/src/limits/upstream-slots.js';
import { IndexCounters } from '../../registry/src/observe/counters.js';
import { fetchDoc } from '../../registry/src/roles/fetch-doc.js';
import { freshness, ttlSecs } from '../../registry/src/roles/freshness.js';
import { DocCache, readThrough } from '../../registry/src/roles/read-through.js';
import { UpstreamClient } from '../../registry/src/roles/upstream.js';
import { UpstreamHealth } from '../../registry/src/roles/upstream-health.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { freePort } from '../support/pypiserver.js';
import { tempDir } from '../support/velodex.js';
import { proxiedOrigin } from './origin.js';

const up = proxiedOrigin();

async function setup(ttl = 300, upstream: UpstreamClient = up.client, deletions: 'follow' | 'keep' = 'follow') {
  const root = tempDir('velodex-fresh-');
  const meta = new FsMetaStore(root);
  const blobs = new FsBlobStore(root);
  await meta.init();
  await blobs.init();
  const clock = { now: 1_000_000 };
  const counters = new IndexCounters('cache');
  const marks: Array<[string, number | null]> = [];
  const cache = new DocCache({
    meta, blobs, ttlSecs: ttl, counters, now: () => clock.now, health: new UpstreamHealth(5_000), deletions,
    onKept: (key, since) => marks.push([key, since]),
  });
  const fetcher = (path: string) => (cond: Parameters<typeof fetchDoc>[2]) => fetchDoc(upstream, path, cond);
  return { meta, blobs, clock, counters, cache, fetcher, marks };
}

describe('ttl and freshness', () => {
  it('takes the shorter of the index TTL and the upstream max-age, and zero for no-cache/no-store', () => {
    expect(ttlSecs(300, {})).toBe(300);
    expect(ttlSecs(300, { cacheControl: 'public, max-age=60' })).toBe(60);
    expect(ttlSecs(30, { cacheControl: 'max-age=600' })).toBe(30);
    expect(ttlSecs(300, { cacheControl: 'max-age=600, s-maxage=120' })).toBe(120);
    expect(ttlSecs(300, { cacheControl: 'max-age=100', age: '40' })).toBe(60);
    expect(ttlSecs(300, { cacheControl: 'max-age=10', age: '40' })).toBe(0);
    expect(ttlSecs(300, { cacheControl: 'no-cache' })).toBe(0);
    expect(ttlSecs(300, { cacheControl: 'max-age=60, No-Store' })).toBe(0);
    expect(ttlSecs(300, { cacheControl: 'max-age=abc' })).toBe(300);
  });

  it('is fresh strictly within the TTL', () => {
    expect(freshness({ fetchedAt: 0, ttlSecs: 10 }, 9_999)).toBe('fresh');
    expect(freshness({ fetchedAt: 0, ttlSecs: 10 }, 10_000)).toBe('revalidate');
    expect(freshness({ fetchedAt: 0, ttlSecs: 0 }, 0)).toBe('revalidate');
  });
});

describe('DocCache (readThrough)', () => {
  it('serves fresh within the TTL, revalidates with the ETag (304), replaces changed content, and serves stale when the upstream is down', async () => {
    up.origin.docs.set('/page/a', { body: 'version 1', etag: '"a1"' });
    const { cache, fetcher, clock, counters } = await setup(60);
    const key = 'cache/idx/pages/a';

    const first = (await readThrough(key, fetcher('/page/a'), cache))!;
    expect(first.source).toBe('fetched');
    expect((await first.body()).toString()).toBe('version 1');
    expect(first.record).toMatchObject({ etag: '"a1"', ttlSecs: 60, size: 9, contentType: 'text/plain' });
    expect(up.proxy.count('/page/a')).toBe(1);

    clock.now += 59_000;
    const fresh = (await cache.read(key, fetcher('/page/a')))!;
    expect(fresh.source).toBe('fresh');
    expect((await fresh.body()).toString()).toBe('version 1');
    expect(up.proxy.count('/page/a')).toBe(1);

    clock.now += 2_000;
    const revalidated = (await cache.read(key, fetcher('/page/a')))!;
    expect(revalidated.source).toBe('revalidated');
    expect(revalidated.record.fetchedAt).toBe(clock.now);
    expect((await revalidated.body()).toString()).toBe('version 1');
    expect(up.proxy.count('/page/a')).toBe(2);
    expect(up.origin.seen.at(-1)!.headers['if-none-match']).toBe('"a1"');
    expect(counters.snapshot()).toMatchObject({ refreshes: 1, changed: 0 });
    // The 304 restarted the TTL.
    expect((await cache.read(key, fetcher('/page/a')))!.source).toBe('fresh');

    up.origin.docs.set('/page/a', { body: 'version 2', etag: '"a2"' });
    clock.now += 61_000;
    const changed = (await cache.read(key, fetcher('/page/a')))!;
    expect(changed.source).toBe('changed');
    expect((await changed.body()).toString()).toBe('version 2');
    expect(changed.record.etag).toBe('"a2"');
    expect(counters.snapshot()).toMatchObject({ refreshes: 2, changed: 1 });

    up.proxy.on('/page/a', { kind: 'status', status: 503 });
    clock.now += 61_000;
    const stale = (await cache.read(key, fetcher('/page/a')))!;
    expect(stale.source).toBe('stale');
    expect((await stale.body()).toString()).toBe('version 2');
    expect(counters.get('stale_served')).toBe(1);
    expect(cache.health.offline).toBe(true);
    expect(cache.health.lastError).toContain('503');

    // While the upstream rests after a failure, stale copies are served without asking it.
    const asked = up.proxy.count('/page/a');
    expect((await cache.read(key, fetcher('/page/a')))!.source).toBe('stale');
    expect(up.proxy.count('/page/a')).toBe(asked);
    expect(counters.get('stale_served')).toBe(2);

    up.proxy.clear();
    clock.now += 6_000;
    expect((await cache.read(key, fetcher('/page/a')))!.source).toBe('revalidated');
    expect(cache.health.offline).toBe(false);
  });

  it('revalidates with Last-Modified when there is no ETag', async () => {
    up.origin.docs.set('/page/lm', { body: 'dated', lastModified: 'Wed, 21 Oct 2026 07:28:00 GMT' });
    const { cache, fetcher, clock, counters } = await setup(60);
    expect((await cache.read('cache/idx/pages/lm', fetcher('/page/lm')))!.source).toBe('fetched');
    clock.now += 61_000;
    expect((await cache.read('cache/idx/pages/lm', fetcher('/page/lm')))!.source).toBe('revalidated');
    expect(up.origin.seen.at(-1)!.headers['if-modified-since']).toBe('Wed, 21 Oct 2026 07:28:00 GMT');
    expect(counters.get('refreshes')).toBe(1);
  });

  it('honours the upstream Cache-Control: no-cache revalidates on every read', async () => {
    up.origin.docs.set('/page/nc', { body: 'volatile', etag: '"nc"', cacheControl: 'no-cache' });
    const { cache, fetcher } = await setup(300);
    const first = (await cache.read('cache/idx/pages/nc', fetcher('/page/nc')))!;
    expect(first.record.ttlSecs).toBe(0);
    const before = up.proxy.count('/page/nc');
    expect((await cache.read('cache/idx/pages/nc', fetcher('/page/nc')))!.source).toBe('revalidated');
    expect(up.proxy.count('/page/nc')).toBe(before + 1);
  });

  it('answers 502 with a clear message when the upstream is down and nothing is cached', async () => {
    const port = await freePort();
    const dead = new UpstreamClient({ baseUrl: `http://user:pw@127.0.0.1:${port}/?key=secret` });
    const { cache, fetcher, counters } = await setup(300, dead);
    const err = await cache.read('cache/idx/pages/none', fetcher('/simple/none/')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamUnavailableError);
    expect((err as Error).message).toMatch(/upstream could not be reached and nothing is cached/);
    expect((err as Error).message).not.toMatch(/pw|secret/);
    // Index routes answer it with 502; /v2/ with 502 UNKNOWN.
    expect(answerNeutral(JSON_ANSWERS, err)?.status).toBe(502);
    expect(answerNeutral(OCI_ANSWERS, err)).toMatchObject({ status: 502, code: 'UNKNOWN' });
    expect(counters.get('upstream_errors')).toBe(1);
    dead.close();
  });

  it('serves stale when the upstream cannot be reached at all', async () => {
    const port = await freePort();
    up.origin.docs.set('/page/s', { body: 'kept', etag: '"s"' });
    const { cache, fetcher, clock, counters } = await setup(60);
    expect((await cache.read('cache/idx/pages/s', fetcher('/page/s')))!.source).toBe('fetched');
    clock.now += 61_000;
    const dead = new UpstreamClient({ baseUrl: `http://127.0.0.1:${port}` });
    const stale = (await cache.read('cache/idx/pages/s', (cond) => fetchDoc(dead, '/page/s', cond)))!;
    expect(stale.source).toBe('stale');
    expect((await stale.body()).toString()).toBe('kept');
    expect(counters.get('stale_served')).toBe(1);
    dead.close();
  });

  it('passes a concurrency-cap denial through as 429 when nothing is cached', async () => {
    const { cache, counters } = await setup();
    const denied = new SlotWaitTimeoutError(5);
    await expect(cache.read('cache/idx/pages/busy', () => Promise.reject(denied))).rejects.toBe(denied);
    expect(counters.get('upstream_errors')).toBe(0);
    expect(cache.health.offline).toBe(false);
  });

  it('single-flights concurrent revalidations of one document', async () => {
    up.origin.docs.set('/page/sf', { body: 'shared', etag: '"sf"' });
    const { cache, fetcher, clock, counters } = await setup(60);
    up.proxy.on('/page/sf', { kind: 'stall' }, 1);
    const reads = Array.from({ length: 8 }, () => cache.read('cache/idx/pages/sf', fetcher('/page/sf')));
    await up.proxy.stalled(1);
    up.proxy.release();
    const results = await Promise.all(reads);
    expect(results.every((r) => r?.source === 'fetched')).toBe(true);
    expect(up.proxy.count('/page/sf')).toBe(1);

    clock.now += 61_000;
    const again = await Promise.all(Array.from({ length: 8 }, () => cache.read('cache/idx/pages/sf', fetcher('/page/sf'))));
    expect(again.every((r) => r?.source === 'revalidated')).toBe(true);
    expect(up.proxy.count('/page/sf')).toBe(2);
    expect(counters.get('refreshes')).toBe(1);
  });

  it('drops the record when the upstream says the document is gone', async () => {
    up.origin.docs.set('/page/gone', { body: 'here', etag: '"g"' });
    const { cache, fetcher, clock, meta } = await setup(60);
    expect((await cache.read('cache/idx/pages/gone', fetcher('/page/gone')))!.source).toBe('fetched');
    up.origin.docs.delete('/page/gone');
    clock.now += 61_000;
    expect(await cache.read('cache/idx/pages/gone', fetcher('/page/gone'))).toBeNull();
    expect(await meta.get('cache/idx/pages/gone')).toBeNull();
  });

  it('with upstream_deletions = "keep", serves the stored copy the upstream deleted, marked and counted once, until the upstream has it again', async () => {
    up.origin.docs.set('/page/kept', { body: 'kept body', etag: '"k"' });
    const { cache, fetcher, clock, counters, marks } = await setup(60, up.client, 'keep');
    const key = 'cache/idx/pages/kept';
    expect((await cache.read(key, fetcher('/page/kept')))!.source).toBe('fetched');
    up.origin.docs.delete('/page/kept');
    const goneAt = (clock.now += 61_000);
    const kept = (await cache.read(key, fetcher('/page/kept')))!;
    expect(kept.source).toBe('kept');
    expect((await kept.body()).toString()).toBe('kept body');
    expect(kept.record.keptSince).toBe(goneAt);
    // Trusted for another TTL, then asked again: still gone, still kept, not counted again.
    expect((await cache.read(key, fetcher('/page/kept')))!.source).toBe('fresh');
    clock.now += 61_000;
    expect((await cache.read(key, fetcher('/page/kept')))!.record.keptSince).toBe(goneAt);
    expect(counters.get('kept_after_upstream_delete')).toBe(1);
    expect(counters.get('changed')).toBe(0);
    expect(marks).toEqual([[key, goneAt]]);
    // The upstream has it again (the same ETag: a 304): the mark goes.
    up.origin.docs.set('/page/kept', { body: 'kept body', etag: '"k"' });
    clock.now += 61_000;
    const back = (await cache.read(key, fetcher('/page/kept')))!;
    expect(back.source).toBe('revalidated');
    expect(back.record.keptSince).toBeUndefined();
    expect(marks).toEqual([[key, goneAt], [key, null]]);
    expect(counters.get('kept_after_upstream_delete')).toBe(1);
  });
});
