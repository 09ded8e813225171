/**
 * Memory on the s3 backend, against a real MinIO this file starts: a 1 GiB layer pushed in
 * chunked PATCHes and as one monolithic upload, then pulled whole, moves through a velodex whose
 * peak resident memory stays under 256 MiB; and 32 concurrent uploads, whose parts would need
 * 256 MiB at once if each were held in memory, stay under it too (parts stream from the scratch
 * files, a few at a time, and the appends share one budget for bytes waiting to be written).
 * The bytes come from a deterministic generator, so the test never holds a blob either.
 */
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { oci, s3Storage, toml } from '../support/config.js';
import { blocks, digestOfBlocks, MiB } from '../support/pseudo-random-stream.js';
import { Registry } from '../oci/api-support.js';
import { startMinio, type Minio } from '../support/minio.js';
import { storeProbe } from '../support/store-probe.js';
import { startVelodex, type Velodex } from '../support/velodex.js';

const TOKEN = 's3-memory-token-4f0c';
const GiB = 1024 * MiB;
const RSS_LIMIT = 256 * MiB;
const auth = `Basic ${Buffer.from(`__token__:${TOKEN}`).toString('base64')}`;

let minio: Minio;
let server: Velodex;
let reg: Registry;

beforeAll(async () => {
  minio = await startMinio();
  server = await startVelodex({ config: toml(s3Storage(minio, { prefix: 'memory' }), oci.hosted('images', { route: 'team/images', token: TOKEN })) });
  reg = new Registry(server.url, auth);
});

afterAll(async () => {
  await server?.stop();
  await minio?.stop();
});


/** A monolithic `POST ?digest=` streamed from the generator; resolves with the status. */
function postBlob(repo: string, seed: number, size: number, hex: string): Promise<number> {
  const url = new URL(`${server.url}/v2/${repo}/blobs/uploads/?digest=sha256:${hex}`);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: `${url.pathname}${url.search}`,
        headers: { authorization: auth, 'content-type': 'application/octet-stream', 'content-length': String(size) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    pipeline(Readable.from(blocks(seed, size)), req).catch(reject);
  });
}

/** Streams a blob back whole and hashes it on the way. */
async function pulledDigest(repo: string, hex: string): Promise<{ status: number; digest: string; size: number }> {
  const res = await fetch(`${server.url}/v2/${repo}/blobs/sha256:${hex}`);
  const h = createHash('sha256');
  let size = 0;
  for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
    h.update(chunk);
    size += chunk.length;
  }
  return { status: res.status, digest: h.digest('hex'), size };
}

function peakMiB(): string {
  return `peak RSS ${Math.round(server.peakRss() / MiB)} MiB`;
}

it('a 1 GiB layer pushed in 16 MiB PATCHes and as one upload, and pulled whole, within 256 MiB', async () => {
  // Chunked: POST, PATCH x 64, PUT ?digest=.
  const chunkedSeed = 1;
  const loc = await reg.openUpload('team/images/big');
  const hash = createHash('sha256');
  const gen = blocks(chunkedSeed, GiB);
  const CHUNK = 16 * MiB;
  for (let start = 0; start < GiB; start += CHUNK) {
    const parts: Buffer[] = [];
    for (let n = 0; n < CHUNK / MiB; n++) parts.push(gen.next().value as Buffer);
    const chunk = Buffer.concat(parts);
    hash.update(chunk);
    const res = await reg.fetch(loc, {
      method: 'PATCH',
      body: chunk,
      headers: { 'content-type': 'application/octet-stream', 'content-range': `${start}-${start + chunk.length - 1}` },
    });
    expect(res.status).toBe(202);
  }
  const chunkedHex = hash.digest('hex');
  const put = await reg.fetch(`${loc}${loc.includes('?') ? '&' : '?'}digest=sha256:${chunkedHex}`, { method: 'PUT' });
  expect(put.status, await put.text()).toBe(201);

  // Monolithic: one streamed POST ?digest=.
  const monoSeed = 2;
  const monoHex = digestOfBlocks(monoSeed, GiB);
  expect(await postBlob('team/images/big', monoSeed, GiB, monoHex)).toBe(201);

  // Pulled whole (and verified on its way out by the server).
  expect(await pulledDigest('team/images/big', chunkedHex)).toEqual({ status: 200, digest: chunkedHex, size: GiB });
  const probe = await storeProbe(server.dataDir);
  expect(await probe.blobs()).toEqual([chunkedHex, monoHex].sort());
  expect(await probe.staged()).toEqual([]);
  console.log(`s3: 2 GiB pushed, 1 GiB pulled, ${peakMiB()}`);
  expect(server.peakRss(), peakMiB()).toBeLessThan(RSS_LIMIT);
}, 600_000);

it('32 concurrent 16 MiB uploads (256 MiB of parts, were each held in memory) stay within 256 MiB', async () => {
  const seeds = Array.from({ length: 32 }, (_, i) => 100 + i);
  const size = 16 * MiB;
  const hexes = seeds.map((s) => digestOfBlocks(s, size));
  const statuses = await Promise.all(seeds.map((s, i) => postBlob(`team/images/many${i}`, s, size, hexes[i]!)));
  expect(statuses).toEqual(seeds.map(() => 201));
  const probe = await storeProbe(server.dataDir);
  const stored = await probe.blobs();
  for (const hex of hexes) expect(stored).toContain(hex);
  console.log(`s3: 32 concurrent uploads, ${peakMiB()}`);
  expect(server.peakRss(), peakMiB()).toBeLessThan(RSS_LIMIT);
}, 600_000);
