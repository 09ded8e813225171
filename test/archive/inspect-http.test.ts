/**
 * `GET /{route}/inspect/{sha256}/{filename}[/{member...}]` through the real fastify app (injected
 * requests), the blob store on disk, and the status mapping of every refusal; and the server's
 * archive walk cap and listings cache, whose slots the test holds to see who waits.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buffer } from 'node:stream/consumers';
import { MAX_PREVIEW_BYTES } from '../../registry/src/archive/index.js';
import { ArchiveWalks } from '../../registry/src/archive/walks.js';
import { loadEmbeddedDefault } from '../../registry/src/config/load.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { buildApp } from '../../registry/src/app/app.js';
import type { EcosystemFactory } from '../../registry/src/ecosystem/ecosystem.js';
import { HttpError } from '../../registry/src/http/errors.js';
import { pythonFacts } from '../../registry/src/python/facts.js';
import { handleInspect } from '../../registry/src/python/handlers/inspect/handler.js';
import { openStores } from '../../registry/src/storage/index.js';
import { makeFixtures, type Fixtures } from './fixtures.js';

let fx: Fixtures;
let app: FastifyInstance;
const QUICK = 15_000;
// One walk at a time and a short wait window: the cap's tests hold the slot to make others wait.
const walks = new ArchiveWalks({ limit: 1, waitMs: 300 });

beforeAll(async () => {
  fx = await makeFixtures();
  const config = loadEmbeddedDefault({ ecosystems, overrides: { dataDir: join(fx.root, 'data') }, env: { VELODEX_UPLOAD_TOKEN: 'token' } });
  // The app's store is the one the fixtures were written to.
  const stores = await openStores({ ...config.storage, path: join(fx.root, 'store') }, { scratchDir: join(fx.root, 'scratch') });
  // Stands in for the Python dispatch: `inspect/{sha256}/{filename}/{member...}`, owning every fixture.
  const python: EcosystemFactory = (ctx) => ({
    id: 'python',
    async handleIndexRequest(req) {
      const [head, sha256, filename, ...member] = req.rest;
      if (head !== 'inspect' || !sha256 || !filename) throw new HttpError(404, 'not an inspect URL');
      await handleInspect(ctx, req, sha256, filename, member.length > 0 ? member.join('/') : null, {
        owns: async (sha, name) => {
          try {
            return fx.digest(name) === sha;
          } catch {
            return false;
          }
        },
      });
    },
  });
  ({ app } = await buildApp({ ...config, logLevel: 'silent' }, stores, [{ ...pythonFacts, create: python }], { archiveWalks: walks }));
}, 120_000);

afterAll(async () => {
  await app?.close();
  if (fx) rmSync(fx.root, { recursive: true, force: true });
});

const url = (name: string, member = '') => `/root/hosted/inspect/${fx.digest(name)}/${name}${member ? `/${member}` : ''}`;
const get = (path: string) => app.inject({ method: 'GET', url: path });

describe('GET /{route}/inspect/{sha256}/{filename}', () => {
  it('lists a wheel as JSON', { timeout: QUICK }, async () => {
    const res = await get(url('demo-1.0-py3-none-any.whl'));
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = res.json<{ filename: string; sha256: string; format: string; truncated: boolean; members: { path: string; size: number; kind: string }[] }>();
    expect(body).toMatchObject({ filename: 'demo-1.0-py3-none-any.whl', sha256: fx.digest('demo-1.0-py3-none-any.whl'), format: 'zip', truncated: false });
    expect(body.members).toContainEqual(expect.objectContaining({ path: 'demo/__init__.py', size: 25, kind: 'file' }));
  });

  it('lists a tgz, and a nested archive by a path ending in "!/"', { timeout: QUICK }, async () => {
    const tgz = (await get(url('demo-1.0.tgz'))).json<{ format: string; members: { path: string }[] }>();
    expect(tgz.format).toBe('tar.gz');
    expect(tgz.members.map((m) => m.path)).toContain('demo-1.0/setup.py');
    const res = await get(url('outer.zip', 'inner/demo-1.0.tar.gz!/'));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ filename: 'outer.zip', format: 'tar.gz', path: 'inner/demo-1.0.tar.gz' });
  });

  it('says 413 when a listing would blow the limits', { timeout: QUICK }, async () => {
    const res = await get(url('bomb.tar.gz'));
    expect(res.statusCode).toBe(413);
    expect(res.json<{ message: string }>().message).toMatch(/decompression bomb/);
  });
});

describe('GET /{route}/inspect/{sha256}/{filename}/{member}', () => {
  it('returns a text member as text/plain with its size and offset', { timeout: QUICK }, async () => {
    const res = await get(url('demo-1.0-py3-none-any.whl', 'demo/__init__.py'));
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-velodex-member-size']).toBe('25');
    expect(res.headers['x-velodex-member-offset']).toBe('0');
    expect(res.headers['x-velodex-next-offset']).toBeUndefined();
    expect(res.body).toBe("print('hello from demo')\n");
  });

  it('returns a binary member as application/octet-stream', { timeout: QUICK }, async () => {
    const res = await get(url('demo-1.0-py3-none-any.whl', 'demo/data.bin'));
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/octet-stream');
    expect(res.rawPayload.length).toBe(4096);
  });

  it('pages a large text member on character boundaries', { timeout: QUICK }, async () => {
    const first = await get(url('demo-1.0-py3-none-any.whl', 'demo/big.txt'));
    expect(first.statusCode).toBe(200);
    expect(first.headers['content-type']).toBe('text/plain; charset=utf-8');
    const next = Number(first.headers['x-velodex-next-offset']);
    expect(next).toBeGreaterThan(MAX_PREVIEW_BYTES - 4);
    expect(next).toBeLessThanOrEqual(MAX_PREVIEW_BYTES);
    expect(first.rawPayload.length).toBe(next);
    const second = await get(`${url('demo-1.0-py3-none-any.whl', 'demo/big.txt')}?offset=${next}`);
    expect(second.headers['x-velodex-member-offset']).toBe(String(next));
    const stitched = Buffer.concat([first.rawPayload, second.rawPayload]).toString('utf8');
    expect(stitched).not.toContain('\ufffd');
    expect(stitched.startsWith('line with é and ü')).toBe(true);
  });

  it('reads members of nested archives', { timeout: QUICK }, async () => {
    const res = await get(url('outer.zip', 'inner/demo-1.0.tar.gz!/demo-1.0/setup.py'));
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('setuptools');
    const whl = await get(url('outer.tar.gz', 'outer/wheels/demo-1.0-py3-none-any.whl!/demo/__init__.py'));
    expect(whl.body).toContain('hello from demo');
  });
});

describe('refusals and their statuses', () => {
  const cases: [string, () => string, number, RegExp][] = [
    ['unknown sha256', () => `/root/hosted/inspect/${'0'.repeat(64)}/x.whl`, 404, /sha256/],
    ['not a sha256', () => '/root/hosted/inspect/nothex/x.whl', 404, /sha256/],
    ['a filename that is not that blob', () => `/root/hosted/inspect/${fx.digest('plain.zip')}/other.zip`, 404, /no file other\.zip/],
    ['a download-only tar', () => url('demo-1.0.tar.xz'), 415, /download-only/],
    ['descending into a member that is not an archive', () => url('plain.zip', 'readme.txt!/y'), 415, /not an archive/],
    ['a truncated zip', () => url('truncated.zip'), 422, /corrupt or truncated/],
    ['a truncated tar.gz', () => url('truncated.tar.gz'), 422, /corrupt or truncated/],
    ['a missing member', () => url('plain.zip', 'nope.txt'), 404, /no member nope\.txt/],
    ['a directory', () => url('plain.zip', 'docs'), 400, /directory/],
    ['a duplicated member', () => url('traversal.tar', 'dup.txt'), 400, /more than once/],
    ['a symlink', () => url('traversal.tar', 'escape'), 400, /never followed/],
    ['a traversal member path', () => url('plain.zip', 'a/..%2Fb'), 400, /unsafe/],
    ['an absolute member path', () => url('traversal.zip', 'C:/win.txt'), 400, /absolute path/],
    ['a backslash member path', () => url('plain.zip', 'a%5Cb'), 400, /unsafe/],
    ['an offset past the member', () => `${url('plain.zip', 'readme.txt')}?offset=8`, 416, /past the end/],
    ['a bad offset', () => `${url('plain.zip', 'readme.txt')}?offset=-1`, 400, /offset/],
    ['an encrypted member', () => url('encrypted.zip', 'secret.txt'), 415, /encrypted/],
    ['nesting too deep', () => url('deep.zip', 'l1.zip!/l2.zip!/l3.zip!/l4.zip!/deepest.txt'), 413, /at most 3/],
    ['a nested archive claiming 4 GiB', () => url('huge-claim.zip', 'huge.zip!/'), 413, /budget/],
  ];
  for (const [what, path, status, message] of cases) {
    it(`answers ${status} for ${what}`, { timeout: QUICK }, async () => {
      const res = await get(path());
      expect({ status: res.statusCode, body: res.body }).toMatchObject({ status });
      expect(res.json<{ message: string }>().message).toMatch(message);
    });
  }

  it('answers 405 to other methods', async () => {
    const res = await app.inject({ method: 'DELETE', url: url('plain.zip') });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
  });
});

/** Waits until `cond` holds; gives up after a generous while instead of hanging the suite. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; !cond(); i++) {
    if (i > 6000) throw new Error(`${what} never held`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('the archive walk cap and the listings cache', () => {
  it('answers a listing already made from memory while the walk slot is held', { timeout: QUICK }, async () => {
    const paths = [url('demo-1.0.tgz'), url('outer.zip', 'inner/demo-1.0.tar.gz!/')];
    const first = await Promise.all(paths.map(get));
    expect(first.map((r) => r.statusCode)).toEqual([200, 200]);
    const held = await walks.slots.acquire();
    try {
      const again = await Promise.all(paths.map(get));
      expect(again.map((r) => r.statusCode)).toEqual([200, 200]);
      expect(again.map((r) => r.headers['content-type'])).toEqual(first.map((r) => r.headers['content-type']));
      expect(again.map((r) => r.body)).toEqual(first.map((r) => r.body));
    } finally {
      held();
    }
  });

  it('ten concurrent listings of one archive take one place in the walk queue', { timeout: QUICK }, async () => {
    const held = await walks.slots.acquire();
    let answers: Awaited<ReturnType<typeof get>>[];
    try {
      const pending = Array.from({ length: 10 }, () => get(url('outer.zip', 'pkg.whl!/')));
      await until(() => walks.waiters === 10, 'ten listings waiting');
      expect(walks.slots.waiting).toBe(1);
      held();
      answers = await Promise.all(pending);
    } finally {
      held();
    }
    expect(answers.map((r) => r.statusCode)).toEqual(Array(10).fill(200));
    expect(new Set(answers.map((r) => r.body)).size).toBe(1);
    expect(answers[0]?.json()).toMatchObject({ filename: 'outer.zip', path: 'pkg.whl', format: 'zip' });
  });

  it('answers 429 with Retry-After when no walk slot frees within the wait window', { timeout: QUICK }, async () => {
    const held = await walks.slots.acquire();
    try {
      for (const path of [url('plain.zip', 'readme.txt'), url('outer.tar.gz', 'outer/wheels/demo-1.0-py3-none-any.whl!/')]) {
        const res = await get(path);
        expect(res.statusCode).toBe(429);
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
        expect(res.json()).toMatchObject({ statusCode: 429, error: 'Too Many Requests', message: expect.stringMatching(/busy.*retry in \d+ s/) });
      }
    } finally {
      held();
    }
    expect((await get(url('outer.tar.gz', 'outer/wheels/demo-1.0-py3-none-any.whl!/'))).statusCode).toBe(200);
  });

  it('answers 404 at once for an archive deleted after it was listed', { timeout: QUICK }, async () => {
    const digest = fx.digest('demo-1.0.tgz');
    expect((await get(url('demo-1.0.tgz'))).statusCode).toBe(200);
    const stream = await fx.store.get(digest);
    if (!stream) throw new Error('fixture not stored');
    const bytes = await buffer(stream);
    expect(await fx.store.delete(digest)).toBe(true);
    try {
      const res = await get(url('demo-1.0.tgz'));
      expect(res.statusCode).toBe(404);
      expect(res.json<{ message: string }>().message).toMatch(/no stored file/);
    } finally {
      await fx.store.put(Readable.from([bytes]), digest);
    }
  });
});
