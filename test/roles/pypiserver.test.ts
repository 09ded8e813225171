/**
 * The neutral machinery against pypiserver, the real third-party upstream: its Simple page read
 * through the document cache, and one of its files fetched once for many concurrent misses and
 * verified against the sha256 its page advertises.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IndexCounters } from '../../registry/src/observe/counters.js';
import { fetchDoc } from '../../registry/src/roles/fetch-doc.js';
import { DocCache } from '../../registry/src/roles/read-through.js';
import { BlobFlights, type FlightOutcome } from '../../registry/src/roles/single-flight.js';
import { UpstreamClient, header } from '../../registry/src/roles/upstream.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { tempDir } from '../support/velodex.js';

const FILE = 'demo-1.0.tar.gz';
const bytes = randomBytes(3 * 1024 * 1024);
const digest = createHash('sha256').update(bytes).digest('hex');

let pypi: PypiServer;
let proxy: FaultProxy;
let client: UpstreamClient;

beforeAll(async () => {
  const dir = tempDir('velodex-pypiserver-');
  writeFileSync(join(dir, FILE), bytes);
  pypi = await startPypiserver(dir);
  proxy = await FaultProxy.start(pypi.url);
  client = new UpstreamClient({ baseUrl: `${proxy.url}/simple/` });
});

afterAll(async () => {
  client.close();
  await proxy?.close();
  await pypi?.stop();
});

describe('against pypiserver', () => {
  it('reads its Simple page through the cache and fetches a file once for ten concurrent misses', async () => {
    const root = tempDir('velodex-pypi-cache-');
    const meta = new FsMetaStore(root);
    const blobs = new FsBlobStore(root);
    await meta.init();
    await blobs.init();
    mkdirSync(join(root, 'spool'));
    const counters = new IndexCounters('pypi');
    const cache = new DocCache({ meta, blobs, counters });

    const page = (await cache.read('cache/pypi/simple/demo', (cond) => fetchDoc(client, 'demo/', cond)))!;
    expect(page.source).toBe('fetched');
    const html = (await page.body()).toString();
    const link = /href="([^"#]+)#sha256=([0-9a-f]{64})"/.exec(html);
    expect(link?.[2]).toBe(digest);
    expect((await cache.read('cache/pypi/simple/demo', (cond) => fetchDoc(client, 'demo/', cond)))!.source).toBe('fresh');
    expect(pypi.count('/simple/demo/')).toBe(1);

    const fileUrl = new URL(link![1]!, `${proxy.url}/simple/demo/`);
    const outcomes: FlightOutcome[] = [];
    const flights = new BlobFlights({ store: blobs, counters, onOutcome: (o) => outcomes.push(o) });
    const start = async () => {
      const res = await client.get(fileUrl);
      if (res.status !== 200) {
        res.body.resume();
        throw new Error(`upstream answered ${res.status}`);
      }
      return { body: res.body, expected: link![2]!, size: Number(header(res.headers, 'content-length')), meta: {} };
    };
    const deliveries = await Promise.all(Array.from({ length: 10 }, () => flights.open(`sha256:${digest}`, start)));
    const got = await Promise.all(deliveries.map(async (d) => createHash('sha256').update(await buffer(d!.stream)).digest('hex')));
    expect(got).toEqual(Array.from({ length: 10 }, () => digest));
    const outcome = await deliveries[0]!.outcome;
    expect(outcome).toEqual({ kind: 'published', key: `sha256:${digest}`, info: { digest, size: bytes.length } });
    expect(proxy.count(fileUrl.pathname)).toBe(1);
    expect(pypi.count(fileUrl.pathname)).toBe(1);
    expect(await blobs.stat(digest)).toEqual({ digest, size: bytes.length, modifiedMs: expect.any(Number) });
  });
});
