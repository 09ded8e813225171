/**
 * Search in `make bench` (issue 29): what the derived search index costs and answers at 100k
 * Python projects of synthetic metadata.
 *
 * 1. In process: `SearchIndex` with the 100k entries the Python source would make (names of two
 *    words and a number, a summary of eight words, keywords and classifiers): the heap it holds
 *    (measured after a forced collection) and queries per second and p99 by kind of match, one
 *    query at a time.
 * 2. Over HTTP: the same projects seeded into a velodex store (fs, its files written directly, as
 *    gc.ts seeds): the time a started velodex takes to build its index in the background, its RSS
 *    with search on and off, and `/+search` under autocannon by kind of query (p99 included).
 * 3. Uploads: small wheels POSTed one at a time (the upload form twine sends) to velodex on that
 *    store with `[search] enabled` true and false, in alternating rounds: the time per upload and
 *    the ratio (the search index reads the new entry beside the answer, never before it). Then
 *    again with the index's summary document counting every project, as a registry whose projects
 *    came by upload keeps it (each upload rewrites it; every process's search reads it).
 *
 * Knobs (bounded): BENCH_SEARCH_PROJECTS (default 100000), BENCH_SEARCH_UPLOADS (per round and
 * setting, default 40). `VELODEX_BENCH_ONLY=search` runs this section alone.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { SearchEntry } from '../../registry/src/search/entry.js';
import { parseSearchQuery } from '../../registry/src/search/query.js';
import { SearchIndex } from '../../registry/src/search/search-index.js';
import { postUpload } from '../python/fixtures/upload-client.js';
import { search } from '../support/config.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { measure, type Load, type Measured } from './load.js';
import { startVelodexBench, type Server } from './servers.js';

const MiB = 1024 * 1024;
const WRITES_AT_ONCE = 64;

export interface SearchBenchOptions {
  work: string;
  logs: string;
  projects: number;
  uploads: number;
  load: Load;
  progress: (msg: string) => void;
}

// --- synthetic projects ---------------------------------------------------------------------------

/** A deterministic word list: `n` pronounceable words. */
function words(n: number, seed: string): string[] {
  const syllables = ['ka', 'lo', 'mi', 'tu', 're', 'sa', 'no', 'vi', 'da', 'pe', 'zu', 'fo', 'gi', 'ha', 'be', 'ru'];
  // Three or four syllables: 69,632 words to draw from, far more than asked.
  const out = new Set<string>();
  for (let i = 0; out.size < n; i++) {
    const h = createHash('sha256').update(`${seed}/${i}`).digest();
    out.add(Array.from({ length: 3 + (h[0]! % 2) }, (_, k) => syllables[h[k + 1]! % syllables.length]).join(''));
  }
  return [...out];
}

const NAME_WORDS = words(2000, 'name');
const TEXT_WORDS = words(5000, 'text');
const CLASSIFIERS = ['Programming Language :: Python :: 3', 'License :: OSI Approved :: MIT License', 'Topic :: Software Development :: Libraries', 'Framework :: Django', 'Intended Audience :: Developers'];

interface Synthetic {
  name: string;
  version: string;
  summary: string;
  keywords: string[];
  classifiers: string[];
}

function project(i: number): Synthetic {
  const pick = (list: string[], k: number) => list[(i * 7919 + k * 104729) % list.length]!;
  return {
    name: `${pick(NAME_WORDS, 1)}-${pick(NAME_WORDS, 2)}-${i}`,
    version: `${1 + (i % 5)}.${i % 13}.0`,
    // Every tenth says "library": a broad word, matched by 10% of the index.
    summary: [...Array.from({ length: 7 }, (_, k) => pick(TEXT_WORDS, k + 3)), i % 10 === 0 ? 'library' : pick(TEXT_WORDS, 11)].join(' '),
    keywords: [pick(TEXT_WORDS, 12), pick(TEXT_WORDS, 13)],
    classifiers: [CLASSIFIERS[i % CLASSIFIERS.length]!, CLASSIFIERS[(i + 2) % CLASSIFIERS.length]!],
  };
}

function entryOf(p: Synthetic): SearchEntry {
  return { ecosystem: 'python', index: 'hosted', name: p.name, key: p.name, version: p.version, summary: p.summary, keywords: p.keywords, classifiers: p.classifiers, requiresPython: '>=3.8' };
}

/** One query of each kind, on names and words the synthetic index holds. */
function queries(n: number): Array<{ kind: string; q: string }> {
  const p = project(Math.floor(n / 2));
  const [first, second] = p.name.split('-');
  return [
    { kind: 'exact name', q: p.name },
    { kind: 'name prefix', q: `${first}-${second}` },
    { kind: 'name word', q: first! },
    { kind: 'summary word', q: p.summary.split(' ')[2]! },
    { kind: 'two words', q: `${first} ${p.summary.split(' ')[0]}` },
    { kind: 'broad word (10% match)', q: 'library' },
    { kind: 'no match', q: 'zzzzqqq' },
  ];
}

// --- in process -----------------------------------------------------------------------------------

function collect(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

function inProcess(n: number): string {
  collect();
  const before = process.memoryUsage().heapUsed;
  const index = new SearchIndex();
  const started = performance.now();
  for (let i = 0; i < n; i++) index.put(entryOf(project(i)));
  const buildMs = performance.now() - started;
  collect();
  const heap = process.memoryUsage().heapUsed - before;
  const rows = queries(n).map(({ kind, q }) => {
    const query = parseSearchQuery(new URLSearchParams({ q }));
    const times: number[] = [];
    let total = 0;
    const until = performance.now() + 1000;
    while (performance.now() < until) {
      const t = performance.now();
      total = index.search(query).total;
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    const p99 = times[Math.min(times.length - 1, Math.ceil(times.length * 0.99) - 1)]!;
    return `| ${kind} | ${total} | ${Math.round(times.length / ((times.reduce((s, x) => s + x, 0) || 1) / 1000)).toLocaleString('en-US')} | ${p99.toFixed(3)} |`;
  });
  return [
    `In process, ${n.toLocaleString('en-US')} entries: built in ${(buildMs / 1000).toFixed(1)} s; heap held ${(heap / MiB).toFixed(0)} MiB (${Math.round(heap / n)} bytes an entry, ${((heap / MiB) * (100_000 / n)).toFixed(0)} MiB per 100k).`,
    '',
    '| query | matches | queries/s (one at a time) | p99 ms |',
    '|---|---:|---:|---:|',
    ...rows,
  ].join('\n');
}

// --- seeded store ---------------------------------------------------------------------------------

async function pool(count: number, atOnce: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: atOnce }, async () => {
    while (next < count) await fn(next++);
  }));
}

/** Writes `n` project records and their core metadata blobs into the fs store at `storePath`. */
async function seed(storePath: string, n: number): Promise<void> {
  const file = async (path: string, content: string) => {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, content);
  };
  const uploadTime = new Date().toISOString();
  await pool(n, WRITES_AT_ONCE, async (i) => {
    const p = project(i);
    const metadata = `Metadata-Version: 2.1\nName: ${p.name}\nVersion: ${p.version}\nSummary: ${p.summary}\nKeywords: ${p.keywords.join(',')}\n${p.classifiers.map((c) => `Classifier: ${c}\n`).join('')}Requires-Python: >=3.8\n\n`;
    const metaHex = createHash('sha256').update(metadata).digest('hex');
    const filename = `${p.name.replace(/-/g, '_')}-${p.version}-py3-none-any.whl`;
    const record = {
      name: p.name,
      files: { [filename]: { filename, version: p.version, kind: 'wheel', sha256: createHash('sha256').update(filename).digest('hex'), size: 1000, requiresPython: '>=3.8', uploadTime, metadataSha256: metaHex } },
    };
    await file(join(storePath, 'blobs', 'sha256', metaHex.slice(0, 2), metaHex), metadata);
    await file(join(storePath, 'meta', 'python', 'hosted', 'projects', `${p.name}.json`), JSON.stringify(record));
  });
}

async function rssOf(server: Server): Promise<number> {
  const pid = server.pid;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

async function untilBuilt(server: Server, q: string): Promise<number> {
  const started = Date.now();
  for (;;) {
    const res = await fetch(`${server.url}/+search?q=${encodeURIComponent(q)}`);
    const body = (await res.json()) as { complete: boolean; total: number };
    if (body.complete) return Date.now() - started;
    if (Date.now() - started > 15 * 60_000) throw new Error('the search index was not built within 15 minutes');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** `count` small distinct wheels of one project, written by one Python run. */
async function smallWheels(dir: string, count: number, from: number): Promise<string[]> {
  mkdirSync(dir, { recursive: true });
  const script = `
import base64, hashlib, sys, zipfile
out, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(start, start + count):
    v = f'1.0.{i}'
    di = f'bench_search_upload-{v}.dist-info'
    path = f'{out}/bench_search_upload-{v}-py3-none-any.whl'
    files = {'bench_search_upload/__init__.py': f'V = {i!r}\\n'.encode(),
             f'{di}/METADATA': f'Metadata-Version: 2.1\\nName: bench-search-upload\\nVersion: {v}\\nSummary: an upload of the search bench\\n'.encode(),
             f'{di}/WHEEL': b'Wheel-Version: 1.0\\nGenerator: velodex-bench\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'}
    rows = [f'{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()},{len(d)}' for p, d in files.items()]
    files[f'{di}/RECORD'] = ('\\n'.join(rows) + f'\\n{di}/RECORD,,\\n').encode()
    with zipfile.ZipFile(path, 'w') as z:
        for p, d in files.items(): z.writestr(p, d)
    print(path)
`;
  return (await run(tool('python'), ['-c', script, dir, String(from), String(count)])).stdout.trim().split('\n');
}

async function uploadTimes(server: Server, token: string, wheels: string[]): Promise<number[]> {
  const times: number[] = [];
  for (const file of wheels) {
    const t = performance.now();
    const res = await postUpload({ url: `${server.url}/root/hosted/`, token, file });
    if (res.status !== 200) throw new Error(`upload of ${file}: ${res.status} ${res.body.slice(0, 300)}`);
    times.push(performance.now() - t);
  }
  return times;
}

/** The hosted index's summary document as a registry whose `n` projects came by upload keeps it: a count for each. */
async function withSummaryOf(storePath: string, n: number): Promise<void> {
  const path = join(storePath, 'meta', 'observe', 'summary', 'hosted.json');
  const doc = JSON.parse(readFileSync(path, 'utf8')) as { projects: Record<string, number> };
  for (let i = 0; i < n; i++) doc.projects[project(i).name] = 1;
  await writeFile(path, JSON.stringify(doc));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

export async function measureSearch(o: SearchBenchOptions): Promise<string> {
  const out: string[] = ['## Search', ''];
  o.progress(`search: ${o.projects} entries in process`);
  out.push(inProcess(o.projects), '');

  const dataDir = join(o.work, 'search-data');
  mkdirSync(dataDir, { recursive: true });
  o.progress(`search: seeding ${o.projects} projects into an fs store`);
  await seed(join(dataDir, 'store'), o.projects);

  // The bench config reads the upload token from this file (servers.ts).
  const token = createHash('sha256').update(`search-bench/${dataDir}`).digest('hex');
  writeFileSync(join(dataDir, 'upload-token'), `${token}\n`);
  const start = (enabled: boolean, label: string) => startVelodexBench(dataDir, 'warn', join(o.logs, `velodex-search-${label}.log`), [search({ enabled })]);

  o.progress('search: velodex with search, building its index');
  let on = await start(true, 'on');
  const buildMs = await untilBuilt(on, 'library');
  const rssOn = await rssOf(on);
  const rows: string[] = [];
  for (const { kind, q } of queries(o.projects)) {
    o.progress(`search: /+search ${kind}`);
    const m: Measured = await measure({ url: `${on.url}/+search?q=${encodeURIComponent(q)}` }, o.load);
    rows.push(`| ${kind} | ${o.load.connections} | ${Math.round(m.reqPerSec).toLocaleString('en-US')} | ${m.p50Ms} | ${m.p99Ms} |${m.failures ? ' !' : ''}`);
  }
  await on.stop();
  o.progress('search: velodex without search');
  let off = await start(false, 'off');
  await new Promise((r) => setTimeout(r, 3000));
  const rssOff = await rssOf(off);
  await off.stop();

  // Uploads: alternating rounds, so drift of the machine falls on both settings alike.
  let from = 0;
  const uploads = async (label: string): Promise<Record<'on' | 'off', number[]>> => {
    const times: Record<'on' | 'off', number[]> = { on: [], off: [] };
    for (let round = 0; round < 2; round++) {
      for (const setting of ['off', 'on'] as const) {
        o.progress(`search: uploads${label}, round ${round + 1}, search ${setting}`);
        const wheels = await smallWheels(join(o.work, 'search-wheels', `${from}`), o.uploads, from);
        from += o.uploads;
        const server = setting === 'on' ? (on = await start(true, `on-${from}`)) : (off = await start(false, `off-${from}`));
        if (setting === 'on') await untilBuilt(server, 'library');
        times[setting].push(...(await uploadTimes(server, token, wheels)));
        await server.stop();
      }
    }
    return times;
  };
  const times = await uploads('');
  // A registry whose projects came by upload (or that /+status has scanned) keeps a count of each
  // in the index's summary document: every upload rewrites it, and the search reads it.
  await withSummaryOf(join(dataDir, 'store'), o.projects);
  const counted = await uploads(' (summary of every project)');
  const line = (label: string, t: Record<'on' | 'off', number[]>) =>
    `${label} (${t.on.length} a setting, one at a time, small wheels): median ${median(t.off).toFixed(1)} ms without search, ${median(t.on).toFixed(1)} ms with it (${(median(t.on) / (median(t.off) || 1)).toFixed(2)}x).`;
  out.push(
    `Over HTTP (velodex, fs store, one process): the index of ${o.projects.toLocaleString('en-US')} projects built in the background in ${(buildMs / 1000).toFixed(1)} s after start; ` +
      `RSS ${(rssOn / MiB).toFixed(0)} MiB with search, ${(rssOff / MiB).toFixed(0)} MiB without (${((rssOn - rssOff) / MiB).toFixed(0)} MiB for search).`,
    '',
    '| /+search query | conns | req/s | p50 ms | p99 ms |',
    '|---|---:|---:|---:|---:|',
    ...rows,
    '',
    line('Uploads', times),
    line(`Uploads to the same index with its summary counting all ${o.projects.toLocaleString('en-US')} projects`, counted),
    '',
  );
  return out.join('\n');
}
