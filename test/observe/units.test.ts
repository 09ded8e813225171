/**
 * The pure parts of `/+status` and `/+stats`: the query parsers (property-based: any query string
 * gives a parsed query or a 400 with a reason, never another error), the bounded per-project
 * counters and their eviction, the secret descriptions, and the summary document's rules.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Secret } from '../../registry/src/config/secret.js';
import { HttpError } from '../../registry/src/http/errors.js';
import { USAGE_COUNTERS, zeroes } from '../../registry/src/observe/counters.js';
import { ProjectCounters } from '../../registry/src/observe/project-counters.js';
import { secretInfo } from '../../registry/src/observe/redact.js';
import { parseStatsQuery } from '../../registry/src/app/observe/stats-query.js';
import { parseStatusQuery } from '../../registry/src/app/observe/status.js';
import { IndexSummaries, MAX_RECENT, PER_SHARD, SHARD_AT } from '../../registry/src/observe/summary.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import type { MetaStore } from '../../registry/src/storage/types.js';
import { tempDir } from '../support/velodex.js';

const RUNS = { numRuns: 500 };

function outcome<T>(fn: () => T): T | HttpError {
  try {
    return fn();
  } catch (err) {
    if (err instanceof HttpError && err.status === 400 && err.message.length > 0) return err;
    throw err;
  }
}

/** Query strings built from the parameter names that matter, others, and hostile values. */
const queryString = fc
  .array(
    fc.tuple(
      fc.oneof(fc.constantFrom('index', 'project', 'details', 'indexx', ''), fc.string()),
      fc.oneof(fc.constantFrom('root/hosted', '/root/hosted/', '', ' ', '/', 'admin', 'a'.repeat(600)), fc.string(), fc.string({ unit: 'grapheme' })),
    ),
    { maxLength: 4 },
  )
  .map((pairs) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&'));

describe('the /+stats query', () => {
  it('parses any query string into a depth or a 400 with a reason', () => {
    fc.assert(
      fc.property(fc.oneof(queryString, fc.string()), (qs) => {
        const got = outcome(() => parseStatsQuery(new URLSearchParams(qs)));
        if (got instanceof HttpError) return;
        const params = new URLSearchParams(qs);
        expect([...params.keys()].every((k) => k === 'index' || k === 'project')).toBe(true);
        if (got.depth === 'server') expect(params.has('index')).toBe(false);
        else {
          expect(got.route).not.toMatch(/^\/|\/$/);
          expect(got.route.length).toBeGreaterThan(0);
        }
        if (got.depth === 'project') expect(got.project.trim()).toBe(got.project);
      }),
      RUNS,
    );
  });

  it('reads the three depths and refuses what is not one', () => {
    expect(parseStatsQuery(new URLSearchParams(''))).toEqual({ depth: 'server' });
    expect(parseStatsQuery(new URLSearchParams('index=/root/hosted/'))).toEqual({ depth: 'index', route: 'root/hosted' });
    expect(parseStatsQuery(new URLSearchParams('index=root/hosted&project=Alpha'))).toEqual({ depth: 'project', route: 'root/hosted', project: 'Alpha' });
    for (const bad of ['project=alpha', 'index=a&index=b', 'index=', 'index=/', 'other=1', `index=${'a'.repeat(600)}`]) {
      expect(outcome(() => parseStatsQuery(new URLSearchParams(bad)))).toBeInstanceOf(HttpError);
    }
  });
});

describe('the /+status query', () => {
  it('takes details=admin or nothing, anything else is a 400', () => {
    fc.assert(
      fc.property(fc.oneof(queryString, fc.string()), (qs) => {
        const got = outcome(() => parseStatusQuery(new URLSearchParams(qs)));
        if (got instanceof HttpError) return;
        expect(got.details).toBe(new URLSearchParams(qs).get('details') === 'admin');
      }),
      RUNS,
    );
    expect(parseStatusQuery(new URLSearchParams('details=admin'))).toEqual({ details: true });
    expect(parseStatusQuery(new URLSearchParams(''))).toEqual({ details: false });
  });
});

describe('per-project counters', () => {
  it('keep the most recently counted projects and files, folding the evicted ones so sums hold', () => {
    const c = new ProjectCounters(zeroes, 2, 2);
    c.add('a', 'downloads', 1, 'a-1.whl');
    c.add('b', 'downloads', 1, 'b-1.whl');
    c.add('a', 'pages', 1);
    c.add('c', 'downloads', 5, 'c-1.whl');
    expect([...c.entries()].map(([n]) => n)).toEqual(['a', 'c']);
    expect(c.evicted.downloads).toBe(1);
    c.add('a', 'metadata', 1, 'a-2.whl');
    c.add('a', 'bytes', 7, 'a-3.whl');
    const a = c.get('a')!;
    expect([...a.files.keys()]).toEqual(['a-2.whl', 'a-3.whl']);
    expect(a.evictedFiles).toEqual({ downloads: 1, metadata: 0, bytes: 0 });
    // Only downloads, metadata and bytes are counted per file.
    c.add('a', 'uploads', 1, 'a-3.whl');
    expect(a.files.get('a-3.whl')).toEqual({ downloads: 0, metadata: 0, bytes: 7 });
    expect(a.values.uploads).toBe(1);
  });

  it('never track more than the cap, and projects plus evicted add up to what was counted', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 9 }), fc.constantFrom(...USAGE_COUNTERS), fc.nat(100)), { maxLength: 200 }), (adds) => {
        const c = new ProjectCounters(zeroes, 3, 2);
        const total = zeroes();
        for (const [p, name, n] of adds) {
          c.add(`p${p}`, name, n, `f${n % 4}`);
          total[name] += n;
        }
        expect(c.size).toBeLessThanOrEqual(3);
        const seen = { ...c.evicted };
        for (const [, e] of c.entries()) {
          expect(e.files.size).toBeLessThanOrEqual(2);
          for (const k of USAGE_COUNTERS) seen[k] += e.values[k];
        }
        expect(seen).toEqual(total);
      }),
      { numRuns: 200 },
    );
  });
});

describe('secrets in /+status', () => {
  it('show whether one is configured and the kind of source, never the value, variable name or path', () => {
    expect(secretInfo(undefined)).toEqual({ configured: false });
    expect(secretInfo(new Secret('v1', 'inline'))).toEqual({ configured: true, source: 'inline' });
    expect(secretInfo(new Secret('v2', 'env:MY_TOKEN'))).toEqual({ configured: true, source: 'env' });
    expect(secretInfo(new Secret('v3', 'file:/run/secrets/token'))).toEqual({ configured: true, source: 'file' });
  });
});

describe('index summaries', () => {
  it('count every write, keep absolute project counts, cap recent uploads, and keep the serial through a repair', async () => {
    const store = new FsMetaStore(tempDir('velodex-summary-'));
    await store.init();
    // Two writers on one store: compare-and-swap keeps both increments (replicas rely on the
    // store's CAS the same way; the fs backend's holds within one process).
    const summaries = new IndexSummaries(store);
    const other = new IndexSummaries(store);
    const up = (i: number) => ({ time: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), index: 'h', project: 'p', filename: `p-${i}.whl` });
    for (let i = 0; i < MAX_RECENT + 5; i++) await summaries.record('h', { projects: { p: i + 1 }, uploads: [up(i)] });
    await Promise.all([summaries.record('h', { projects: { q: 1 } }), other.record('h', { projects: { q: 1 } })]);
    let doc = (await summaries.read('h'))!;
    expect(doc.serial).toBe(MAX_RECENT + 7);
    expect(doc.projects.p).toBe(MAX_RECENT + 5);
    expect(doc.recent).toHaveLength(MAX_RECENT);
    expect(doc.recent[0]!.filename).toBe(`p-${MAX_RECENT + 4}.whl`);
    await summaries.record('h', { projects: { q: 0 } });
    expect((await summaries.read('h'))!.projects.q).toBeUndefined();
    doc = await summaries.repair('h', { projects: { r: 3 }, recent: [] });
    expect(doc).toMatchObject({ serial: MAX_RECENT + 8, projects: { r: 3 }, recent: [] });
    expect(doc.scannedAt).toBeDefined();
  });

  it('drop the change serials the search kept in them before it had its own log, on the next write', async () => {
    const store = new FsMetaStore(tempDir('velodex-summary-'));
    await store.init();
    await store.put(IndexSummaries.key('h'), { serial: 3, projects: { p: 1 }, recent: [], changed: { p: 3 }, changedFloor: 1 });
    const summaries = new IndexSummaries(store);
    await summaries.record('h', { projects: { q: 1 } });
    expect(await summaries.read('h')).toEqual({ serial: 4, projects: { p: 1, q: 1 }, recent: [] });
  });

  it('write the changes that arrive during a write of the document together, in one more write', async () => {
    const store = new FsMetaStore(tempDir('velodex-summary-'));
    await store.init();
    const puts: string[] = [];
    const counted: MetaStore = {
      get: (key) => store.get(key),
      put: (key, doc, ifVersion) => {
        puts.push(key);
        return store.put(key, doc, ifVersion);
      },
      delete: (key, ifVersion) => store.delete(key, ifVersion),
      list: (prefix) => store.list(prefix),
    };
    const summaries = new IndexSummaries(counted);
    const up = (i: number) => ({ time: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), index: 'h', project: `p${i}`, filename: `p${i}.whl` });
    // The first write starts at once; the 29 others queue behind it and go as one batch.
    await Promise.all(Array.from({ length: 30 }, (_, i) => summaries.record('h', { projects: { [`p${i}`]: 1 }, uploads: [up(i)] })));
    expect(puts).toEqual(['observe/summary/h', 'observe/summary/h']);
    const doc = (await summaries.read('h'))!;
    expect(doc.serial).toBe(30);
    expect(Object.keys(doc.projects)).toHaveLength(30);
    expect(doc.recent.map((r) => r.filename)).toEqual(Array.from({ length: 30 }, (_, i) => `p${29 - i}.whl`));
    // A batch that cannot be written fails every write in it; the next record starts afresh.
    const failing = new IndexSummaries({ ...counted, put: () => Promise.reject(new Error('store down')) });
    await expect(Promise.all([failing.record('x'), failing.record('x')])).rejects.toThrow('store down');
    await expect(summaries.record('x')).resolves.toBeUndefined();
  });

  it('move their project counts into shards past SHARD_AT projects: a write then rewrites the small summary and one shard, never the whole map', async () => {
    const store = new FsMetaStore(tempDir('velodex-summary-'));
    await store.init();
    const many = Object.fromEntries(Array.from({ length: SHARD_AT }, (_, i) => [`p${i}`, 1 + (i % 3)]));
    await store.put(IndexSummaries.key('h'), { serial: 7, projects: many, recent: [], kept: { gone: 1 } });
    const puts: Array<{ key: string; bytes: number }> = [];
    const counted: MetaStore = {
      get: (key) => store.get(key),
      put: (key, doc, ifVersion) => {
        puts.push({ key, bytes: JSON.stringify(doc).length });
        return store.put(key, doc, ifVersion);
      },
      delete: (key, ifVersion) => store.delete(key, ifVersion),
      list: (prefix) => store.list(prefix),
    };
    // Two processes: one writes the project past the threshold (and moves), the other writes meanwhile.
    const one = new IndexSummaries(counted);
    const two = new IndexSummaries(store);
    await Promise.all([one.record('h', { projects: { fresh: 2 } }), ...Array.from({ length: 10 }, (_, i) => two.record('h', { projects: { [`late${i}`]: 1, p0: 9 } }))]);
    // The move runs after the write that found it due, off its answer.
    await one.moved();
    await two.moved();
    const doc = (await one.read('h'))!;
    expect(doc.projectShards).toEqual({ generation: expect.stringMatching(/^[0-9a-f]{12}$/), count: 16 });
    expect(doc.projects).toEqual({});
    expect(doc).toMatchObject({ serial: 18, kept: { gone: 1 } });
    const all = await two.projects('h', doc);
    expect(Object.keys(all)).toHaveLength(SHARD_AT + 11);
    expect(all).toMatchObject({ fresh: 2, p0: 9, late9: 1, p1999: 1 + (1999 % 3) });

    // Sharded: a write is the summary (serial, recent) and its project's shard, each small.
    puts.length = 0;
    await one.record('h', { projects: { ['__proto__']: 4, p1: 0 } });
    expect(new Set(puts.map((p) => p.key.split('/').slice(0, 3).join('/')))).toEqual(new Set(['observe/summary/h', 'observe/summary-projects/h']));
    expect(puts.length).toBeLessThanOrEqual(3);
    for (const p of puts) expect(p.bytes, p.key).toBeLessThan(8_000);
    const after = await one.projects('h', (await one.read('h'))!);
    expect(Object.hasOwn(after, '__proto__') && after['__proto__']).toBe(4);
    expect(after.p1).toBeUndefined();

    // A repair replaces the counts with a new generation of shards and deletes the old one.
    const before = doc.projectShards!;
    const repaired = await one.repair('h', { projects: Object.fromEntries(Array.from({ length: SHARD_AT + 1 }, (_, i) => [`r${i}`, 1])), recent: [] });
    expect(repaired.projectShards!.generation).not.toBe(before.generation);
    expect(repaired).toMatchObject({ serial: 19, projects: {}, kept: { gone: 1 } });
    expect(Object.keys(await one.projects('h', repaired))).toHaveLength(SHARD_AT + 1);
    const shardKeys = async () => {
      const keys: string[] = [];
      for await (const key of store.list('observe/summary-projects/h')) keys.push(key);
      return keys;
    };
    expect((await shardKeys()).every((k) => k.startsWith(`observe/summary-projects/h/${repaired.projectShards!.generation}/`))).toBe(true);

    // Growing: a shard past four times its aim moves every project into more shards.
    const grown = Object.fromEntries(Array.from({ length: 16 * PER_SHARD * 4 }, (_, i) => [`g${i}`, 1]));
    await one.record('h', { projects: grown });
    await one.moved();
    const big = (await one.read('h'))!;
    expect(big.projectShards!.count).toBeGreaterThanOrEqual(64);
    expect(Object.keys(await two.projects('h', big))).toHaveLength(SHARD_AT + 1 + 16 * PER_SHARD * 4);
    expect((await shardKeys()).every((k) => k.startsWith(`observe/summary-projects/h/${big.projectShards!.generation}/`))).toBe(true);
  }, 60_000);
});
