/**
 * The per-index summaries behind `/+status?details=admin` follow every kind of write, read back
 * from the store: a twine upload, a promotion into another hosted index, a delete from a volatile
 * index, a crane push and a crane delete. Each write moves the serial by one.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hosted, oci, toml } from '../support/config.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';

const TOKEN = 'observe-writes-token';
let server: Velodex;
let alpha: BuiltProject;
let work: string;

interface Details {
  projects: number;
  files: number;
  source: string;
}
interface Status {
  serial: number;
  indexes: Array<{ name: string; details?: Details }>;
  recent_uploads: Array<{ index: string; project: string; filename: string }>;
}

const CONFIG = toml(hosted('staging', { token: TOKEN, volatile: true }), hosted('release', { token: TOKEN }), oci.hosted('images', { token: TOKEN }));

async function admin(): Promise<{ serial: number; details: Record<string, Details>; recent: Status['recent_uploads'] }> {
  const s = (await (await fetch(`${server.url}/+status?details=admin`)).json()) as Status;
  return { serial: s.serial, details: Object.fromEntries(s.indexes.map((i) => [i.name, i.details!])), recent: s.recent_uploads };
}

async function write(method: string, path: string): Promise<void> {
  const res = await fetch(`${server.url}${path}`, { method, headers: { authorization: basicAuth(TOKEN) } });
  expect(res.status, await res.text()).toBe(200);
}

function crane(args: string[], input?: string) {
  return run(tool('crane'), [...args, '--insecure'], { env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, input, timeoutMs: 180_000 });
}

beforeAll(async () => {
  alpha = await buildProject('alpha', '1.0');
  work = tempDir('velodex-observe-writes-');
  server = await startVelodex({ config: CONFIG });
});

afterAll(async () => {
  await server?.stop();
});

describe('summaries follow the writes', () => {
  it('count uploads, promotions, deletes, manifest pushes and deletes', async () => {
    // The first admin request scans the empty indexes; everything after is kept by the writes.
    expect(await admin()).toMatchObject({ serial: 0, details: { staging: { projects: 0, files: 0, source: 'scan' } } });

    await run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/root/staging/`, '-u', '__token__', '-p', TOKEN, alpha.wheel, alpha.sdist]);
    let s = await admin();
    expect(s.serial).toBe(2);
    expect(s.details.staging).toEqual({ projects: 1, files: 2, source: 'summary', scanned_at: expect.any(String) });
    expect(s.recent.map((r) => `${r.index}/${r.filename}`).sort()).toEqual([`staging/${alpha.sdistFilename}`, `staging/${alpha.wheelFilename}`].sort());

    await write('PUT', '/root/release/alpha/1.0/promote?from=root/staging');
    s = await admin();
    expect(s.serial).toBe(3);
    expect(s.details.release).toMatchObject({ projects: 1, files: 2, source: 'summary' });

    await write('DELETE', '/root/staging/alpha/1.0/');
    s = await admin();
    expect(s.serial).toBe(4);
    expect(s.details.staging).toMatchObject({ projects: 0, files: 0 });
    expect(s.details.release).toMatchObject({ projects: 1, files: 2 });

    await crane(['auth', 'login', `127.0.0.1:${server.port}`, '-u', '__token__', '--password-stdin'], TOKEN);
    const image = buildImage({ seed: 'observe-writes', layers: 1, bigFileSize: 1024 });
    const ref = `127.0.0.1:${server.port}/root/images/app`;
    await crane(['push', writeLayout(join(work, 'src'), [{ tag: 'v1', item: image }]), `${ref}:v1`]);
    s = await admin();
    expect(s.serial).toBe(5);
    expect(s.details.images).toMatchObject({ projects: 1, files: 1, source: 'summary' });
    expect(s.recent[0]).toMatchObject({ index: 'images', project: 'app', filename: image.manifest.descriptor.digest });

    await crane(['delete', `${ref}@${image.manifest.descriptor.digest}`]);
    s = await admin();
    expect(s.serial).toBe(6);
    expect(s.details.images).toMatchObject({ projects: 0, files: 0 });
  });
});
