/**
 * Three velodex processes on one MinIO bucket act as one Python registry: what one process
 * acknowledges, the next read on any other shows (uploads, the project list, yank, delete, cached
 * overrides), concurrent uploads through different processes all land, the same filename uploaded
 * through two processes at once has exactly one winner, and the status summary loses no write.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildBigWheel } from './fixtures/big-wheel.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';
import { postUpload, sha256File } from './fixtures/upload-client.js';
import { detail, get, listed, write, type Detail } from './mutations-client.js';
import { startCluster, type Cluster } from '../support/cluster.js';
import { cached, hosted, s3Storage, toml, virtual } from '../support/config.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { serverStores, storeProbe } from '../support/store-probe.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 'mp-python-token-9a2e';
const UP_TOKEN = 'mp-upstream-token-4f10';
const CLEAN_ENV = { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' };

let upstream: Velodex;
let cluster: Cluster;
let a: Velodex;
let b: Velodex;
let c: Velodex;
let upstreamProject: BuiltProject;

beforeAll(async () => {
  upstreamProject = await buildProject('mp-upstream', '1.0');
  upstream = await startVelodex({ config: toml(hosted('up', { token: UP_TOKEN })) });
  for (const file of [upstreamProject.wheel, upstreamProject.sdist]) {
    expect((await postUpload({ url: `${upstream.url}/root/up/`, token: UP_TOKEN, file })).status).toBe(200);
  }
  cluster = await startCluster(
    3,
    toml(
      hosted('rel', { token: TOKEN, volatile: true }),
      cached('mirror', `${upstream.url}/root/up/simple/`),
      virtual('dev', ['rel', 'mirror'], { uploadTarget: 'rel' }),
    ),
  );
  [a, b, c] = cluster.nodes as [Velodex, Velodex, Velodex];
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
  await upstream?.stop();
});

const simple = (node: Velodex, route = 'root/rel') => `${node.url}/${route}/simple/`;

function twine(node: Velodex, files: string[]) {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${node.url}/root/rel/`, '-u', '__token__', '-p', TOKEN, ...files], {
    env: { NO_COLOR: '1', COLUMNS: '200' },
  });
}

async function serial(node: Velodex): Promise<number> {
  const res = await fetch(`${node.url}/+status`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { serial: number }).serial;
}

describe('three processes on one bucket', () => {
  it('twine uploads through A; B lists it and pip installs it from B', async () => {
    const alpha = await buildProject('mp-alpha', '1.0');
    // B and C render their project lists first, so a stale cached list would show.
    expect(await listed(simple(b))).not.toContain('mp-alpha');
    expect(await listed(simple(c))).not.toContain('mp-alpha');
    await twine(a, [alpha.wheel, alpha.sdist]);

    expect(await listed(simple(b))).toContain('mp-alpha');
    expect(await listed(simple(c))).toContain('mp-alpha');
    const target = tempDir('velodex-mp-pip-');
    const res = await run(tool('pip'), ['install', '--no-cache-dir', '--target', target, '--index-url', simple(b), 'mp-alpha'], { env: CLEAN_ENV });
    expect(res.stdout).toMatch(/Successfully installed mp-alpha-1\.0/);
    const shown = await run(tool('python'), ['-c', 'import importlib.metadata as m; print(m.version("mp-alpha"))'], { env: { PYTHONPATH: target } });
    expect(shown.stdout.trim()).toBe('1.0');
  });

  it('concurrent twine uploads of different files to one project through three processes all land, and the summary counts each', async () => {
    const versions = ['1.0', '1.1', '1.2', '2.0', '2.1', '2.2'];
    const builds = await Promise.all(versions.map((v) => buildProject('mp-many', v)));
    const files = builds.flatMap((p) => [p.wheel, p.sdist]);
    const before = await serial(a);
    const nodes = [a, b, c];
    // Each process gets a third of the files; the three twine runs go at once.
    await Promise.all(nodes.map((node, i) => twine(node, files.filter((_, j) => j % 3 === i))));

    const expected = files.map((f) => f.split('/').pop()!).sort();
    for (const node of nodes) {
      const page = await detail(simple(node), 'mp-many');
      expect(page.files.map((f) => f.filename).sort()).toEqual(expected);
      expect(page.versions).toEqual(['1.0', '1.1', '1.2', '2.0', '2.1', '2.2']);
      for (const f of page.files) expect(f.hashes.sha256).toBe(await sha256File(files.find((p) => p.endsWith(`/${f.filename}`))!));
    }
    // Every upload counted once in the shared summary, whichever process answers.
    for (const node of nodes) expect(await serial(node)).toBe(before + files.length);
  }, 180_000);

  it('24 uploads at once to 12 projects through three processes: all succeed and the shared summary counts each once', async () => {
    const builds = await Promise.all(Array.from({ length: 12 }, (_, i) => buildProject(`mp-burst-${i}`, '1.0')));
    const files = builds.flatMap((p) => [p.wheel, p.sdist]);
    const before = await serial(b);
    const nodes = [a, b, c];
    // Every upload also rewrites the index's one summary document: 24 writers race for it.
    const answers = await Promise.all(files.map((file, i) => postUpload({ url: `${nodes[i % 3]!.url}/root/rel/`, token: TOKEN, file })));
    expect(answers.map((r) => r.status)).toEqual(files.map(() => 200));
    for (const node of nodes) expect(await serial(node)).toBe(before + files.length);
    const listedNames = await listed(simple(c));
    expect(listedNames).toEqual(expect.arrayContaining(builds.map((p) => p.name)));
    for (const node of nodes) expect(node.logs()).not.toContain('status summary not updated');
  }, 180_000);

  it('the same filename uploaded through two processes at once: one winner, a clear refusal for the other', async () => {
    for (const version of ['1.0', '1.1', '1.2']) {
      const [one, two] = await Promise.all([buildProject('mp-dup', version, { variant: 'one' }), buildProject('mp-dup', version, { variant: 'two' })]);
      expect(one.wheelFilename).toBe(two.wheelFilename);
      const answers = await Promise.all([postUpload({ url: `${a.url}/root/rel/`, token: TOKEN, file: one.wheel }), postUpload({ url: `${b.url}/root/rel/`, token: TOKEN, file: two.wheel })]);
      expect(answers.map((r) => r.status).sort()).toEqual([200, 400]);
      const loser = answers.find((r) => r.status === 400)!;
      expect((JSON.parse(loser.body) as { message: string }).message).toMatch(
        new RegExp(`${one.wheelFilename.replace(/\./g, '\\.')} already exists on this index with different content`),
      );
      const winner = answers[0]!.status === 200 ? one : two;
      for (const node of [a, b, c]) {
        const page = await detail(simple(node), 'mp-dup');
        expect(page.files.filter((f) => f.filename === one.wheelFilename).map((f) => f.hashes.sha256)).toEqual([await sha256File(winner.wheel)]);
      }
    }
  }, 120_000);

  it('yank, unyank and delete through one process are seen by the next read on the others', async () => {
    const gamma = await buildProject('mp-gamma', '1.0');
    await twine(a, [gamma.wheel, gamma.sdist]);
    // B renders (and caches) the page before the change.
    expect((await detail(simple(b), 'mp-gamma')).files.every((f) => f.yanked === false)).toBe(true);

    expect((await write('PUT', `${a.url}/root/rel/mp-gamma/1.0/yank?reason=broken%20build`, { token: TOKEN })).status).toBe(200);
    expect((await detail(simple(b), 'mp-gamma')).files.map((f) => f.yanked)).toEqual(['broken build', 'broken build']);

    expect((await write('DELETE', `${c.url}/root/rel/mp-gamma/1.0/yank`, { token: TOKEN })).status).toBe(200);
    expect((await detail(simple(b), 'mp-gamma')).files.every((f) => f.yanked === false)).toBe(true);

    expect(await listed(simple(c))).toContain('mp-gamma');
    expect((await write('DELETE', `${a.url}/root/rel/mp-gamma/`, { token: TOKEN })).status).toBe(200);
    expect((await get(`${simple(b)}mp-gamma/`)).status).toBe(404);
    expect(await listed(simple(b))).not.toContain('mp-gamma');
    expect(await listed(simple(c))).not.toContain('mp-gamma');
  });

  it("overrides of cached files through A are seen by B's next read", async () => {
    const url = (node: Velodex) => simple(node, 'root/dev');
    const files = (await detail(url(b), 'mp-upstream')).files;
    expect(files.map((f) => f.filename).sort()).toEqual([upstreamProject.sdistFilename, upstreamProject.wheelFilename].sort());
    expect(files.every((f) => f.yanked === false)).toBe(true);

    expect((await write('PUT', `${a.url}/root/dev/mp-upstream/yank`, { token: TOKEN })).status).toBe(200);
    expect((await detail(url(b), 'mp-upstream')).files.every((f) => f.yanked !== false)).toBe(true);

    expect((await write('DELETE', `${c.url}/root/dev/mp-upstream/1.0/`, { token: TOKEN })).status).toBe(200);
    const page = await get(`${url(b)}mp-upstream/`);
    expect(page.status === 404 ? [] : (page.json as unknown as Detail).files).toEqual([]);
  });

  it('kill -9 of the process receiving an upload: nothing of it is visible, and twine through another process then succeeds', async () => {
    const wheel = await buildBigWheel(tempDir('velodex-mp-big-'), 40 * 1024 * 1024);
    // A fourth process on the same store, to be killed.
    const victim = await startVelodex({ config: toml(s3Storage(cluster.minio, { prefix: 'cluster' }), hosted('rel', { token: TOKEN, volatile: true })) });
    const before = (await storeProbe(a.dataDir)).blobs();
    let killed = false;
    const upload = postUpload({
      url: `${victim.url}/root/rel/`,
      token: TOKEN,
      file: wheel.path,
      onSent: async (sent) => {
        if (killed || sent < 16 * 1024 * 1024) return;
        killed = true;
        // Let the bytes so far reach the server's stage, then kill it mid-body.
        await new Promise((r) => setTimeout(r, 300));
        process.kill(victim.pid, 'SIGKILL');
      },
    }).then(
      (res) => `answered ${res.status}`,
      (err: Error) => `failed: ${err.message}`,
    );
    expect(await upload).toMatch(/^failed: (socket hang up|read ECONNRESET|write EPIPE|write ECONNRESET)/);
    await victim.stop();
    // Nothing of it anywhere: no file on any process, no new blob in the store.
    for (const node of [a, b, c]) expect((await get(`${simple(node)}bigwheel/`)).status).toBe(404);
    expect(await (await storeProbe(a.dataDir)).blobs()).toEqual(await before);
    // The user's retry, through another process, succeeds and installs from a third.
    await twine(b, [wheel.path]);
    const page = await detail(simple(c), 'bigwheel');
    expect(page?.files.map((f) => f.filename)).toEqual([wheel.filename]);
    expect(page?.files[0]?.hashes.sha256).toBe(await sha256File(wheel.path));
  });

  it('an index stored without the names document (an earlier version) still lists every project', async () => {
    const names = await listed(simple(a));
    expect(names).toEqual(expect.arrayContaining(['mp-alpha', 'mp-many', 'mp-dup']));
    const stores = await serverStores(a.dataDir);
    expect(await stores.meta.delete('python/rel/names')).toBe(true);
    expect(await listed(simple(b))).toEqual(names);
    // Built once from the records, and kept.
    expect((await stores.meta.get<{ names: string[] }>('python/rel/names'))?.doc.names).toEqual(names);
  });
});
