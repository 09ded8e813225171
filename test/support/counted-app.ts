/**
 * velodex's app in process over the run's backend (fs, or s3 on an s3 run), its stores wrapped by
 * `countedStores`, for the suites that count what a request costs the store. Apps started on one
 * data dir share its store, as processes of one registry do; each has its own scratch folder.
 */
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { parse as parseToml } from 'smol-toml';
import { expect } from 'vitest';
import { buildConfig } from '../../registry/src/config/load.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { buildApp } from '../../registry/src/app/app.js';
import type { Ecosystem } from '../../registry/src/ecosystem/ecosystem.js';
import { countedStores, StoreCallCounter, type StoreCalls } from '../../registry/src/storage/counted.js';
import { BlobHolds } from '../../registry/src/storage/holds.js';
import { openStores, type Stores } from '../../registry/src/storage/index.js';
import { RecentReads } from '../../registry/src/storage/recent-reads.js';
import { storageOf } from './store-probe.js';

export interface CountedApp {
  app: FastifyInstance;
  running: Ecosystem[];
  /** `http://127.0.0.1:<port>`. */
  url: string;
  counter: StoreCallCounter;
}

/**
 * Starts one app named `name` over the store of `dataDir` with the config text `toml`;
 * `readCacheMs` sets `[storage] read_cache_ms` on that store.
 */
export async function startCountedApp(dataDir: string, name: string, toml: string, readCacheMs?: number): Promise<CountedApp> {
  const config = buildConfig(parseToml(toml), name, { ecosystems, overrides: { dataDir: join(dataDir, name) } });
  const counter = new StoreCallCounter();
  const stores = countedStores(await openStores(storageOf(dataDir), { scratchDir: join(dataDir, name, 'scratch') }), counter);
  const { app, ecosystems: running } = await buildApp({ ...config, logLevel: 'silent' }, readCacheMs ? withRecentReads(stores, readCacheMs) : stores, ecosystems);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { app, running, counter, url: `http://127.0.0.1:${port}` };
}

/** As `openStores` applies `[storage] read_cache_ms`, but above the counter: what it answers from memory is not counted. */
function withRecentReads(stores: Stores, boundMs: number): Stores {
  const meta = new RecentReads(stores.meta, boundMs);
  return { ...stores, meta, holds: new BlobHolds(meta, stores.blobs) };
}

export async function stopCountedApp(p: CountedApp | undefined): Promise<void> {
  await p?.app.close();
  await Promise.all(p?.running.map((e) => e.close?.()) ?? []);
}

/** Resolves once no store call was counted for 50 ms (at most 2 s). */
async function quiet(counter: StoreCallCounter): Promise<void> {
  const until = Date.now() + 2000;
  let last = -1;
  while (Date.now() < until) {
    const now = counter.snapshot().total;
    if (now === last) return;
    last = now;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The store calls of one request, after it has been answered with `status`. */
export async function costOf(p: CountedApp, request: () => Promise<Response>, status = 200): Promise<StoreCalls> {
  // What an earlier request left running after its answer (a cached fill's summary record) is not this one's.
  await quiet(p.counter);
  p.counter.reset();
  const res = await request();
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return p.counter.snapshot();
}
