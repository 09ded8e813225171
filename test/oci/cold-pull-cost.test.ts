/**
 * What a cold pull-through of one blob costs the store, counted (never timed): velodex's app in
 * process over the run's backend, its stores wrapped by `countedStores`, with a cached index in
 * front of another app's hosted index as its upstream. A blob pulled through for the first time
 * is looked for once (its bytes: with none stored, its holds are not read), fetched without looking
 * again (no flight of it ended since), staged and held: its holds document is new with its bytes,
 * so it is written without a read. A blob that another flight stored while the request looked is
 * looked for again, and not fetched twice.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoreCalls } from '../../registry/src/storage/counted.js';
import { oci, toml } from '../support/config.js';
import { startCountedApp, stopCountedApp, type CountedApp } from '../support/counted-app.js';
import { basicAuth, tempDir } from '../support/velodex.js';
import { until } from '../support/until.js';
import { Registry } from './api-support.js';

const REPO = 'root/oci/cold';

/** The store calls of one GET, counted until the flight's last write has landed after the answer. */
async function pullCost(p: CountedApp, url: string): Promise<{ calls: StoreCalls; body: Buffer }> {
  p.counter.reset();
  const res = await fetch(url);
  const body = Buffer.from(await res.arrayBuffer());
  expect(res.status, body.toString('utf8')).toBe(200);
  // The hold and the publish come after the last byte was sent: wait until the calls stop.
  let last = -1;
  await until('the pull-through to finish storing', async () => {
    const now = p.counter.snapshot().total;
    const settled = now === last && now > 0;
    last = now;
    await new Promise((r) => setTimeout(r, 100));
    return settled ? true : undefined;
  });
  return { calls: p.counter.snapshot(), body };
}

describe('a cold blob pulled through a cached index', () => {
  let upstream: CountedApp;
  let mirror: CountedApp;

  beforeAll(async () => {
    upstream = await startCountedApp(tempDir(), 'upstream', toml(oci.hosted('hosted', { route: 'root/oci', token: 'token' })));
    const port = new URL(upstream.url).port;
    mirror = await startCountedApp(tempDir(), 'mirror', toml(oci.cached('mirror', `http://localhost:${port}`, { route: 'mirror', upstreamHosts: ['localhost'] })));
  });
  afterAll(async () => {
    await stopCountedApp(mirror);
    await stopCountedApp(upstream);
  });

  it('is looked for once, and held with one write and no read of its holds document', async () => {
    const layer = Buffer.from(`cold layer ${Date.now()}`);
    const hex = await new Registry(upstream.url, basicAuth('token')).pushBlob(REPO, layer);
    expect(hex).toBe(createHash('sha256').update(layer).digest('hex'));

    const { calls, body } = await pullCost(mirror, `${mirror.url}/v2/mirror/${REPO}/blobs/sha256:${hex}`);
    expect(body.equals(layer)).toBe(true);
    // Looked for (no bytes, so no read of the hold), staged, held without a read.
    expect(calls.calls, JSON.stringify(calls)).toEqual({ 'blobs.stat': 1, 'blobs.stage': 1, 'meta.put': 1 });

    // Stored and held: the next GET is a warm read (bytes and hold in one round trip).
    const again = await fetch(`${mirror.url}/v2/mirror/${REPO}/blobs/sha256:${hex}`);
    expect(Buffer.from(await again.arrayBuffer()).equals(layer)).toBe(true);
  });
});
