/**
 * Upload refusals that depend on the configuration: the `max-file-size` policy (403 with the
 * policy denial object, reading stopped at the limit), an index without an upload token (403)
 * and a route that does not accept writes (405).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cached, hosted, toml } from '../support/config.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { makeBigWheel } from './fixtures/archives.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';
import { storeState } from './fixtures/store.js';
import { postUpload } from './fixtures/upload-client.js';

const TOKEN = 'policy-test-token';
const LIMIT = 1024 * 1024;

let server: Velodex;
let alpha: BuiltProject;
let big: string;
const dir = tempDir('velodex-policy-');

beforeAll(async () => {
  alpha = await buildProject('alpha', '1.0');
  big = await makeBigWheel(dir, 64 * 1024 * 1024);
  server = await startVelodex({
    config: toml(hosted('hosted', { token: TOKEN, policy: { maxFileSize: LIMIT } }), hosted('locked'), cached('mirror', 'http://127.0.0.1:9/simple/')),
  });
});

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('max-file-size', () => {
  it('denies a larger file with 403 and the policy denial object, without reading it all', async () => {
    const res = await postUpload({ url: `${server.url}/root/hosted/`, token: TOKEN, file: big });
    expect(res.status, res.body).toBe(403);
    expect(JSON.parse(res.body)).toEqual({
      action: 'upload',
      project: 'big',
      filename: 'big-1.0-py3-none-any.whl',
      version: '1.0',
      rule: 'max-file-size',
      field: 'size',
      reason: expect.stringMatching(/larger than the max-file-size of 1048576 bytes/) as unknown,
    });
    expect(res.statusMessage).toMatch(/max-file-size/);
    const state = await storeState(server.dataDir);
    expect(state).toEqual({ staged: [], blobs: [], projects: [] });
    // Reading stopped at the limit: the answer came long before the client had sent 64 MiB.
    expect(res.sentBeforeAnswer).toBeLessThan(16 * 1024 * 1024);
  });

  it('twine shows the denial', async () => {
    const out = await run(
      tool('twine'),
      ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', TOKEN, join(big)],
      { allowFailure: true, env: { NO_COLOR: '1', COLUMNS: '200' } },
    );
    expect(out.code).not.toBe(0);
    expect(out.stdout + out.stderr).toMatch(/403 Forbidden/);
    expect(out.stdout + out.stderr).toMatch(/max-file-size/);
    expect((await storeState(server.dataDir)).staged).toEqual([]);
  });

  it('accepts a file under the limit', async () => {
    const res = await postUpload({ url: `${server.url}/root/hosted/`, token: TOKEN, file: alpha.wheel });
    expect(res.status, res.body).toBe(200);
  });
});

describe('indexes that take no uploads', () => {
  it('answers 403 when the index has no upload token', async () => {
    const res = await postUpload({ url: `${server.url}/root/locked/`, token: TOKEN, file: alpha.wheel });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toMatchObject({ message: expect.stringMatching(/uploads are disabled/) as unknown });
    expect(res.statusMessage).toMatch(/uploads are disabled/);
  });

  it('answers 405 on a cached index', async () => {
    const res = await postUpload({ url: `${server.url}/root/mirror/`, token: TOKEN, file: alpha.wheel });
    expect(res.status).toBe(405);
    expect(JSON.parse(res.body)).toMatchObject({ message: expect.stringMatching(/does not accept writes/) as unknown });
    expect((await storeState(server.dataDir, 'mirror')).projects).toEqual([]);
  });
});
