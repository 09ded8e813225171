/**
 * The layer-contents route under load, in process so the test can hold the server's walk slots:
 * concurrent listings of one layer share one walk, a listed layer answers from memory without a
 * slot, a deleted layer is 404 at once, a client that leaves gives up its place, and a request that
 * finds no slot within the wait window gets 429 TOOMANYREQUESTS with Retry-After.
 */
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArchiveWalks } from '../../registry/src/archive/walks.js';
import { loadEmbeddedDefault } from '../../registry/src/config/load.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { buildApp } from '../../registry/src/app/app.js';
import type { Ecosystem } from '../../registry/src/ecosystem/ecosystem.js';
import { openStores } from '../../registry/src/storage/index.js';
import { basicAuth, tempDir } from '../support/velodex.js';
import { expectOciError, Registry } from './api-support.js';

const REPO = 'root/oci/walks';
/** Files in the large layer: more than a listing shows (10,000), so it is also truncated. */
const FILES = 12_000;

interface Running {
  app: FastifyInstance;
  running: Ecosystem[];
  walks: ArchiveWalks;
  reg: Registry;
}

/** velodex's app over a fresh store, listening on a free port, with the given walk cap. */
async function start(walks: ArchiveWalks): Promise<Running> {
  const dir = tempDir();
  const config = loadEmbeddedDefault({ ecosystems, overrides: { dataDir: join(dir, 'data') }, env: { VELODEX_UPLOAD_TOKEN: 'token' } });
  const stores = await openStores({ ...config.storage, path: join(dir, 'store') }, { scratchDir: join(dir, 'scratch') });
  const { app, ecosystems: running } = await buildApp({ ...config, logLevel: 'silent' }, stores, ecosystems, { archiveWalks: walks });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { app, running, walks, reg: new Registry(`http://127.0.0.1:${port}`, basicAuth('token')) };
}

async function stop(server: Running | undefined): Promise<void> {
  await server?.app.close();
  await Promise.all(server?.running.map((e) => e.close?.()) ?? []);
}

/** A gzip tar layer of `files` small text files (about 2.5 KiB of tar each). */
async function layer(files: number, tag: string): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const c of p as AsyncIterable<Buffer>) chunks.push(c);
  })();
  for (let i = 0; i < files; i++) {
    const body = Buffer.from(`${tag} file ${i}\n`.repeat(200).slice(0, 2000));
    await new Promise<void>((resolve, reject) => p.entry({ name: `usr/share/${tag}/${i % 50}/f${i}.txt` }, body, (err) => (err ? reject(err) : resolve())));
  }
  p.finalize();
  await collected;
  return gzipSync(Buffer.concat(chunks), { level: 1 });
}

/** Waits until `cond` holds; gives up after a generous while instead of hanging the suite. */
async function until(cond: () => boolean, what = 'the condition'): Promise<void> {
  for (let i = 0; !cond(); i++) {
    if (i > 6000) throw new Error(`${what} never held`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('layer contents with the walk cap and the listings cache', () => {
  let server: Running;
  let big: string;
  const contents = (digest: string, query = '', init: RequestInit = {}) => server.reg.fetch(`/v2/${REPO}/blobs/${digest}/contents${query}`, { ...init, authed: false });

  beforeAll(async () => {
    // One walk at a time and the default 30 s wait, so holding the slot makes every walk queue.
    server = await start(new ArchiveWalks({ limit: 1 }));
    // About 30 MiB of tar: each listing walk inflates most of it.
    big = `sha256:${await server.reg.pushBlob(REPO, await layer(FILES, 'big'))}`;
  });

  afterAll(() => stop(server));

  it('twenty concurrent listings of one large layer take one place in the walk queue, then all answer the same 200', async () => {
    const { walks } = server;
    const held = await walks.slots.acquire();
    let answers: { status: number; body: string }[];
    try {
      const responses = Array.from({ length: 20 }, () => contents(big).then(async (res) => ({ status: res.status, body: await res.text() })));
      await until(() => walks.waiters === 20, 'twenty listings waiting');
      expect(walks.slots.waiting).toBe(1);
      held();
      answers = await Promise.all(responses);
    } finally {
      held();
    }
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
    expect(new Set(answers.map((a) => a.body)).size).toBe(1);
    const listing = JSON.parse(answers[0]?.body ?? '{}') as { members: { path: string; previewable: boolean }[]; truncated?: boolean };
    expect(listing.truncated).toBe(true);
    expect(listing.members).toHaveLength(10_000);
    expect(listing.members[0]).toEqual({ path: 'usr/share/big/0/f0.txt', size: 2000, kind: 'file', previewable: true });
    expect(walks.slots.inflight).toBe(0);
  });

  it('a listed layer answers from memory while every walk slot is held; a member preview waits for a slot', async () => {
    const { walks } = server;
    const first = await (await contents(big)).text();
    const held = await walks.slots.acquire();
    let res: Response;
    try {
      const again = await contents(big);
      expect(again.status).toBe(200);
      expect(again.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await again.text()).toBe(first);

      const preview = contents(big, '?member=usr/share/big/7/f7.txt');
      await until(() => walks.slots.waiting === 1, 'the preview waiting for a slot');
      held();
      res = await preview;
    } finally {
      held();
    }
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('big file 7\n'.repeat(200).slice(0, 2000));
  });

  it('a deleted layer is 404 BLOB_UNKNOWN at once, though its listing was kept', async () => {
    const small = `sha256:${await server.reg.pushBlob(REPO, await layer(3, 'deleted'))}`;
    expect((await contents(small)).status).toBe(200);
    const del = await server.reg.fetch(`/v2/${REPO}/blobs/${small}`, { method: 'DELETE' });
    expect(del.status).toBe(202);
    await expectOciError(await contents(small), 404, 'BLOB_UNKNOWN');
  });

  it('a client that disconnects while waiting for a walk slot gives up its place', async () => {
    const { walks } = server;
    const other = `sha256:${await server.reg.pushBlob(REPO, await layer(3, 'left'))}`;
    const held = await walks.slots.acquire();
    try {
      const abort = new AbortController();
      const gone = contents(other, '', { signal: abort.signal }).catch((e: unknown) => e);
      await until(() => walks.slots.waiting === 1, 'the listing waiting for a slot');
      abort.abort();
      expect(await gone).toBeInstanceOf(Error);
      await until(() => walks.slots.waiting === 0, 'the queue empty again');
      expect(walks.waiters).toBe(0);
    } finally {
      held();
    }
    // The server is fine, and a later client lists the layer.
    const res = await contents(other);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { members: unknown[] }).members).toHaveLength(3);
  });
});

describe('layer contents when no walk slot frees in time', () => {
  let server: Running;
  let digest: string;
  beforeAll(async () => {
    // A short wait window, so the 429 comes without waiting 30 s.
    server = await start(new ArchiveWalks({ limit: 1, waitMs: 200 }));
    digest = `sha256:${await server.reg.pushBlob(REPO, await layer(3, 'busy'))}`;
  });
  afterAll(() => stop(server));

  it('answers a listing and a preview with 429 TOOMANYREQUESTS and Retry-After, then serves them once a slot is free', async () => {
    const url = (query = '') => `/v2/${REPO}/blobs/${digest}/contents${query}`;
    const held = await server.walks.slots.acquire();
    try {
      for (const query of ['', '?member=usr/share/busy/0/f0.txt']) {
        const res = await server.reg.fetch(url(query), { authed: false });
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
        const error = await expectOciError(res, 429, 'TOOMANYREQUESTS');
        expect(error.message).toMatch(/busy.*retry in \d+ s/);
      }
    } finally {
      held();
    }
    expect((await server.reg.fetch(url(), { authed: false })).status).toBe(200);
    expect((await server.reg.fetch(url('?member=usr/share/busy/0/f0.txt'), { authed: false })).status).toBe(200);
  });
});
