/**
 * A 512 MiB wheel goes through the upload path (streamed from disk, spooled, validated member by
 * member, published) while the server's peak resident memory stays under 256 MiB.
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startVelodex, defaultToken, tempDir, type Velodex } from '../support/velodex.js';
import { makeBigWheel } from './fixtures/archives.js';
import { storeState } from './fixtures/store.js';
import { postUpload, sha256File } from './fixtures/upload-client.js';

const MiB = 1024 * 1024;
let server: Velodex;
let wheel: string;
const dir = tempDir('velodex-large-');

beforeAll(async () => {
  wheel = await makeBigWheel(dir, 512 * MiB);
  server = await startVelodex();
});

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
  // The store holds a 512 MiB blob now.
  if (server) rmSync(server.dataDir, { recursive: true, force: true });
});

it('uploads a 512 MiB wheel in bounded memory', async () => {
  const res = await postUpload({ url: `${server.url}/root/hosted/`, token: defaultToken(server), file: wheel });
  expect(res.status, res.body).toBe(200);
  const digest = await sha256File(wheel);
  expect(JSON.parse(res.body)).toMatchObject({ filename: 'big-1.0-py3-none-any.whl', sha256: digest, duplicate: false });
  expect((await storeState(server.dataDir)).blobs).toContain(digest);
  expect((await storeState(server.dataDir)).staged).toEqual([]);
  const peak = server.peakRss();
  console.log(`server peak RSS after a 512 MiB upload: ${Math.round(peak / MiB)} MiB`);
  expect(peak, `peak RSS ${Math.round(peak / MiB)} MiB`).toBeLessThan(256 * MiB);
}, 600_000);
