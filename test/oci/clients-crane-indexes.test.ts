/**
 * crane with two teams on one server: two hosted OCI indexes with their own upload tokens, each
 * team logged in from its own DOCKER_CONFIG (its own machine). What team A pushes is invisible
 * and undeletable through team B's index; when both teams push the same image, each DELETE
 * releases only its own team's copy, and the bytes leave the store with the last one.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeProbe, type StoreProbe } from '../support/store-probe.js';
import { allBlobs, buildImage, layoutMismatches, readLayout, writeLayout, type Blob } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { expectOciError, TWO_TEAMS } from './api-support.js';

let server: Velodex;
let host: string;
let work: string;
let store: StoreProbe;

const TEAMS = { a: 'token-a', b: 'token-b' } as const;
type Team = keyof typeof TEAMS;

function crane(team: Team, args: string[], opts: { input?: string; allowFailure?: boolean } = {}): Promise<RunResult> {
  const env = { HOME: work, DOCKER_CONFIG: join(work, `docker-${team}`) };
  return run(tool('crane'), [...args, '--insecure'], { env, input: opts.input, allowFailure: opts.allowFailure, timeoutMs: 180_000 });
}

beforeAll(async () => {
  server = await startVelodex({ config: TWO_TEAMS });
  host = `127.0.0.1:${server.port}`;
  work = tempDir('velodex-crane-teams-');
  store = await storeProbe(server.dataDir);
  for (const team of ['a', 'b'] as const) await crane(team, ['auth', 'login', host, '-u', '__token__', '--password-stdin'], { input: TEAMS[team] });
});

afterAll(async () => {
  await server?.stop();
});

const blobUrl = (name: string, b: Blob) => `${server.url}/v2/${name}/blobs/${b.descriptor.digest}`;
const deleteBlob = (team: Team, name: string, b: Blob) => fetch(blobUrl(name, b), { method: 'DELETE', headers: { authorization: basicAuth(TEAMS[team]) } });

/** crane pulls the whole image from `ref` into a fresh layout, byte for byte. */
async function pullsWhole(ref: string, blobs: Blob[], dir: string): Promise<void> {
  const out = join(work, dir);
  await crane('a', ['pull', '--format', 'oci', ref, out]);
  expect(layoutMismatches(readLayout(out), blobs)).toEqual([]);
}

describe('crane, two teams', () => {
  it("pushes to team A; team B's index neither serves nor deletes the blobs; same image in both, deleted by each", async () => {
    const image = buildImage({ seed: 'crane-two-teams', layers: 2, bigFileSize: 4096 });
    const src = writeLayout(join(work, 'src'), [{ tag: 'v1', item: image }]);
    const blobs = [image.config, ...image.layers];
    const refA = `${host}/team-a/oci/app:v1`;
    const refB = `${host}/team-b/oci/app:v1`;

    await crane('a', ['push', src, refA]);

    for (const b of blobs) {
      await expectOciError(await fetch(blobUrl('team-b/oci/app', b)), 404, 'BLOB_UNKNOWN');
      expect((await fetch(blobUrl('team-b/oci/app', b), { method: 'HEAD' })).status).toBe(404);
      await expectOciError(await deleteBlob('b', 'team-b/oci/app', b), 404, 'BLOB_UNKNOWN');
    }
    const missing = await crane('b', ['blob', `${host}/team-b/oci/app@${image.layers[0]?.descriptor.digest}`], { allowFailure: true });
    expect(missing.code).not.toBe(0);
    expect((await crane('b', ['digest', refB], { allowFailure: true })).code).not.toBe(0);
    await pullsWhole(refA, allBlobs(image), 'pull-a-1');

    // Team B pushes the same image: its own holds on the same bytes.
    await crane('b', ['push', src, refB]);
    expect((await crane('b', ['digest', refB])).stdout.trim()).toBe(image.manifest.descriptor.digest);

    // The manifest first: while it is there, it keeps the blobs it names.
    for (const b of [image.manifest, ...blobs]) expect((await deleteBlob('b', 'team-b/oci/app', b)).status).toBe(202);
    expect((await crane('b', ['manifest', refB], { allowFailure: true })).code).not.toBe(0);
    await pullsWhole(refA, allBlobs(image), 'pull-a-2');
    for (const b of blobs) expect(await store.has(b.descriptor.digest.slice('sha256:'.length))).toBe(true);

    for (const b of [image.manifest, ...blobs]) expect((await deleteBlob('a', 'team-a/oci/app', b)).status).toBe(202);
    for (const b of [...blobs, image.manifest]) {
      await expectOciError(await fetch(blobUrl('team-a/oci/app', b)), 404, 'BLOB_UNKNOWN');
      expect(await store.has(b.descriptor.digest.slice('sha256:'.length))).toBe(false);
    }
    expect((await crane('a', ['manifest', refA], { allowFailure: true })).code).not.toBe(0);
  });
});
