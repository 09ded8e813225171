/**
 * A 1 GiB layer pushed chunked (10 MiB PATCHes) and monolithic (one streamed POST ?digest=):
 * both verify, and the server's peak resident memory stays far below the layer size. The bytes
 * come from a deterministic generator, so neither side ever holds the layer.
 */
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { block, blocks, digestOfBlocks, MiB } from '../support/pseudo-random-stream.js';
import { basicAuth, defaultToken, startVelodex, type Velodex } from '../support/velodex.js';
import { Registry } from './api-support.js';

const TOTAL = 1024 * MiB;
const CHUNK = 10 * MiB;
const RSS_LIMIT = 256 * MiB;

let server: Velodex;
let reg: Registry;

beforeAll(async () => {
  server = await startVelodex();
  reg = new Registry(server.url, basicAuth(defaultToken(server)));
});

afterAll(async () => {
  await server?.stop();
});


/** Checks size and the last MiB of a stored blob against the generator. */
async function expectStored(hex: string, seed: number): Promise<void> {
  const head = await fetch(`${server.url}/v2/root/oci/big/blobs/sha256:${hex}`, { method: 'HEAD' });
  expect(head.status).toBe(200);
  expect(head.headers.get('content-length')).toBe(String(TOTAL));
  const tail = await fetch(`${server.url}/v2/root/oci/big/blobs/sha256:${hex}`, { headers: { range: `bytes=${TOTAL - MiB}-` } });
  expect(tail.status).toBe(206);
  expect(Buffer.from(await tail.arrayBuffer()).equals(block(seed, TOTAL / MiB - 1))).toBe(true);
}

it('pushes a 1 GiB layer in 10 MiB chunks within bounded memory', async () => {
  const seed = 1;
  const loc = await reg.openUpload('root/oci/big');
  const hash = createHash('sha256');
  const gen = blocks(seed, TOTAL);
  for (let start = 0; start < TOTAL; start += CHUNK) {
    const parts: Buffer[] = [];
    for (let n = 0; n < CHUNK / MiB && start + n * MiB < TOTAL; n++) parts.push(gen.next().value as Buffer);
    const chunk = Buffer.concat(parts);
    hash.update(chunk);
    const res = await reg.fetch(loc, {
      method: 'PATCH',
      body: chunk,
      headers: { 'content-type': 'application/octet-stream', 'content-range': `${start}-${start + chunk.length - 1}` },
    });
    expect(res.status).toBe(202);
    expect(res.headers.get('range')).toBe(`0-${start + chunk.length - 1}`);
  }
  const hex = hash.digest('hex');
  const res = await reg.fetch(`${loc}?digest=sha256:${hex}`, { method: 'PUT' });
  expect(res.status).toBe(201);
  await expectStored(hex, seed);
  expect(server.peakRss()).toBeLessThan(RSS_LIMIT);
});

it('pushes a 1 GiB layer as one streamed POST ?digest= within bounded memory', async () => {
  const seed = 2;
  const hex = digestOfBlocks(seed, TOTAL);
  const url = new URL(`${server.url}/v2/root/oci/big/blobs/uploads/?digest=sha256:${hex}`);
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: `${url.pathname}${url.search}`,
        headers: { authorization: reg.auth, 'content-type': 'application/octet-stream', 'content-length': String(TOTAL) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    pipeline(Readable.from(blocks(seed, TOTAL)), req).catch(reject);
  });
  expect(status).toBe(201);
  await expectStored(hex, seed);
  expect(server.peakRss()).toBeLessThan(RSS_LIMIT);
});
