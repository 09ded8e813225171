/**
 * The garbage collector in `make bench` (issue 25), on fs and on s3 (MinIO):
 *
 * 1. One collection over many blobs. The store is seeded directly, without HTTP, so seeding takes
 *    seconds, not an hour of pushes (s3: through the storage layer, `openStores`; fs: the store's
 *    own files, `fsFilesTarget`): blobs, holds documents and OCI manifest records. About half
 *    the blobs are referenced (images of a config, nine layers and their manifest, tagged in 64
 *    repositories), a quarter are held by a repository none of whose manifests names them (what
 *    a manifest DELETE leaves), a quarter are held by nobody (an aborted push of an earlier
 *    version). Holds are timed two days back
 *    and the run waits out the grace period, so the collection must delete exactly the second
 *    and third parts (checked: a different count is a setup error). Then `velodex gc` runs as
 *    an operator runs it (registry/dist/cli.js), with a preload that counts its HTTP requests
 *    to the store (s3; the fs store makes no requests, so per-blob time is printed instead) and
 *    reads its peak RSS. On fs, the Distribution registry's `registry garbage-collect` runs over
 *    a store of the same shape (its filesystem layout written directly), for a ratio; it needs
 *    the registry stopped or read-only while it runs, velodex's does not.
 * 2. Push throughput with a collection beside it: crane pushes of small images (a few at once)
 *    into the seeded store's server, alone and then while collections loop (fs: `POST /+admin/gc`
 *    to the same server, whose processes share the fs store's locks; s3: `velodex gc` in another
 *    process on the same bucket), and the ratio.
 *
 * Knobs (bounded): BENCH_GC_BLOBS (fs, default 100000), BENCH_GC_BLOBS_S3 (default 10000: on this
 * two-core machine MinIO takes about a minute per 10k blobs seeded and as long again collected),
 * BENCH_GC_PUSH_SECS (seconds of pushes per phase, default 15).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { loadConfigFile } from '../../registry/src/config/load.js';
import { openStores, type Stores } from '../../registry/src/storage/index.js';
import { admin, gc, hosted, oci, s3Storage, toml, type ConfigPart } from '../support/config.js';
import { startMinio } from '../support/minio.js';
import { buildImage, MT, writeLayout } from '../support/oci-image.js';
import { CLI, tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { busyCores, machineTicks } from './process-stats.js';
import { DISTRIBUTION, distributionMissing, startVelodexBench, type Server } from './servers.js';

const MiB = 1024 * 1024;
const ADMIN = 'bench-gc-admin-token';
/** Short, so that the run need not wait a day; holds are timed far before it anyway. */
const GRACE_SECS = 5;
const INDEX = 'oci';
const REPOS = 64;
/** Layers per seeded image: with its config and its manifest, 11 blobs an image. */
const LAYERS = 9;
/** Store writes in flight while seeding. */
const SEED_AT_ONCE = 48;
/** crane pushes at once in the push rows. */
const PUSHERS = 3;

export interface GcBenchOptions {
  work: string;
  logs: string;
  token: string;
  blobsFs: number;
  blobsS3: number;
  pushSecs: number;
  progress: (m: string) => void;
}

/**
 * Loaded into `velodex gc` with `--import`: counts the HTTP requests the process starts (the
 * `http.client.request.start` diagnostics channel, which the s3 client's requests pass) and, at
 * exit, writes them and the process's peak RSS to the file `VELODEX_BENCH_PROBE_OUT` names.
 */
const PROBE = `data:text/javascript,${encodeURIComponent(
  [
    "import dc from 'node:diagnostics_channel';",
    "import { writeFileSync } from 'node:fs';",
    'let requests = 0;',
    "dc.subscribe('http.client.request.start', () => { requests++; });",
    "process.on('exit', () => writeFileSync(process.env.VELODEX_BENCH_PROBE_OUT, JSON.stringify({ requests, maxRssKb: process.resourceUsage().maxRSS })));",
  ].join(' '),
)}`;

interface Shape {
  images: number;
  referenced: number;
  /** Held by a repository whose manifests do not name them. */
  unreferenced: number;
  /** Held by nobody. */
  orphans: number;
}

function shapeOf(total: number): Shape {
  const images = Math.floor(total / 2 / (LAYERS + 2));
  const referenced = images * (LAYERS + 2);
  const unreferenced = Math.floor((total - referenced) / 2);
  return { images, referenced, unreferenced, orphans: total - referenced - unreferenced };
}

/** Distinct small bytes for blob `n` of a kind (each digest different). */
const bytesOf = (kind: string, n: number) => Buffer.from(`velodex gc bench ${kind} ${n} ${'x'.repeat(n % 97)}`);
const hexOf = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const repoOf = (n: number) => `bench/gc/r${n % REPOS}`;

async function pool(count: number, atOnce: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(atOnce, count) }, worker));
}

/** One image's blobs and its manifest (OCI image manifest), as bytes. */
function seedImage(n: number): { blobs: Buffer[]; manifest: Buffer } {
  const config = bytesOf('config', n);
  const layers = Array.from({ length: LAYERS }, (_, j) => bytesOf(`layer-${j}`, n));
  const desc = (mediaType: string, b: Buffer) => ({ mediaType, digest: `sha256:${hexOf(b)}`, size: b.length });
  const manifest = Buffer.from(
    JSON.stringify({ schemaVersion: 2, mediaType: MT.manifest, config: desc(MT.config, config), layers: layers.map((l) => desc(MT.layer, l)) }),
  );
  return { blobs: [config, ...layers], manifest };
}

/** Where seeding writes: a blob under its digest, a document under its key. */
interface SeedTarget {
  blob(hex: string, bytes: Buffer): Promise<void>;
  doc(key: string, doc: unknown): Promise<void>;
}

/** Through the storage layer (s3: every object a PUT to MinIO, as a server writes it). */
function storesTarget(stores: Stores): SeedTarget {
  return {
    blob: async (hex, bytes) => void (await stores.blobs.put(Readable.from([bytes]), hex)),
    doc: async (key, doc) => void (await stores.meta.put(key, doc, null)),
  };
}

/**
 * fs: the very files FsBlobStore and FsMetaStore write (`<store>/blobs/sha256/<ab>/<hex>`,
 * `<store>/meta/<key>.json`), without the fsync of each file and folder they do for durability:
 * through them 100k blobs take about three minutes to seed on this machine, written here about
 * twenty seconds. The collection then reads them through the store like any other (and the
 * counts it reports are checked).
 */
function fsFilesTarget(storePath: string): SeedTarget {
  const file = async (path: string, content: Buffer | string) => {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, content);
  };
  return {
    blob: (hex, bytes) => file(join(storePath, 'blobs', 'sha256', hex.slice(0, 2), hex), bytes),
    doc: (key, doc) => file(join(storePath, 'meta', `${key}.json`), JSON.stringify(doc)),
  };
}

/** Seeds `shape` into velodex's store: blobs, holds (timed two days back), manifest records and tags. */
async function seedVelodex(target: SeedTarget, shape: Shape): Promise<void> {
  const past = Date.now() - 2 * 24 * 3600 * 1000;
  const put = async (bytes: Buffer, holder: string | null): Promise<string> => {
    const hex = hexOf(bytes);
    if (holder) await target.doc(`holds/${hex.slice(0, 2)}/${hex}`, { holders: [holder], touched: { [holder]: past } });
    await target.blob(hex, bytes);
    return hex;
  };
  const holder = (n: number) => `oci.${INDEX}/${repoOf(n)}`;
  const tags = new Map<string, Record<string, string>>();
  await pool(shape.images, SEED_AT_ONCE, async (n) => {
    const image = seedImage(n);
    await Promise.all(image.blobs.map((b) => put(b, holder(n))));
    const hex = await put(image.manifest, holder(n));
    const descriptor = { mediaType: MT.manifest, digest: `sha256:${hex}`, size: image.manifest.length };
    const record = { mediaType: MT.manifest, size: image.manifest.length, descriptor, pushedAt: new Date(past).toISOString() };
    await target.doc(`oci/${INDEX}/repos/${repoOf(n)}/_manifests/${hex}`, record);
    const repoTags = tags.get(repoOf(n)) ?? {};
    repoTags[`v${n}`] = hex;
    tags.set(repoOf(n), repoTags);
  });
  for (const [repo, t] of tags) await target.doc(`oci/${INDEX}/repos/${repo}/_tags`, { tags: t });
  await pool(shape.unreferenced, SEED_AT_ONCE, (n) => put(bytesOf('unreferenced', n), holder(n)).then(() => undefined));
  await pool(shape.orphans, SEED_AT_ONCE, (n) => put(bytesOf('orphan', n), null).then(() => undefined));
}

/** The same shape in the Distribution registry's filesystem layout (its storage driver's paths). */
async function seedDistribution(root: string, shape: Shape): Promise<void> {
  const v2 = join(root, 'docker', 'registry', 'v2');
  const file = async (path: string, content: Buffer | string) => {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, content);
  };
  const blob = (bytes: Buffer) => {
    const hex = hexOf(bytes);
    return file(join(v2, 'blobs', 'sha256', hex.slice(0, 2), hex, 'data'), bytes).then(() => hex);
  };
  const repoDir = (n: number) => join(v2, 'repositories', repoOf(n));
  const layerLink = (n: number, hex: string) => file(join(repoDir(n), '_layers', 'sha256', hex, 'link'), `sha256:${hex}`);
  await pool(shape.images, SEED_AT_ONCE, async (n) => {
    const image = seedImage(n);
    for (const b of image.blobs) await layerLink(n, await blob(b));
    const hex = await blob(image.manifest);
    const m = join(repoDir(n), '_manifests');
    await file(join(m, 'revisions', 'sha256', hex, 'link'), `sha256:${hex}`);
    await file(join(m, 'tags', `v${n}`, 'current', 'link'), `sha256:${hex}`);
    await file(join(m, 'tags', `v${n}`, 'index', 'sha256', hex, 'link'), `sha256:${hex}`);
  });
  await pool(shape.unreferenced, SEED_AT_ONCE, async (n) => layerLink(n, await blob(bytesOf('unreferenced', n))));
  await pool(shape.orphans, SEED_AT_ONCE, (n) => blob(bytesOf('orphan', n)).then(() => undefined));
}

interface GcRun {
  wallMs: number;
  durationMs: number;
  blobsScanned: number;
  blobsDeleted: number;
  requests: number;
  maxRss: number;
}

/** `velodex gc` as an operator runs it, counted by the probe. */
async function velodexGc(configFile: string, dataDir: string, probeOut: string): Promise<GcRun> {
  const t0 = performance.now();
  const res = await run(process.execPath, ['--import', PROBE, CLI, 'gc', '--config', configFile, '--data-dir', dataDir], {
    env: { VELODEX_BENCH_PROBE_OUT: probeOut, VELODEX_LOG_LEVEL: 'warn' },
    timeoutMs: 900_000,
  });
  const wallMs = performance.now() - t0;
  const probe = JSON.parse(readFileSync(probeOut, 'utf8')) as { requests: number; maxRssKb: number };
  const num = (re: RegExp) => Number(re.exec(res.stdout)?.[1] ?? NaN);
  return {
    wallMs,
    durationMs: num(/in (\d+) ms/),
    blobsScanned: num(/blobs listed: (\d+)/),
    blobsDeleted: num(/blobs deleted: (\d+)/),
    requests: probe.requests,
    maxRss: probe.maxRssKb * 1024,
  };
}

/** `registry garbage-collect` over `root`, timed, its peak RSS from /usr/bin/time. */
async function distributionGc(root: string, configFile: string, logFile: string): Promise<{ wallMs: number; maxRss: number; deleted: number }> {
  writeFileSync(configFile, ['version: 0.1', 'log:', '  level: error', 'storage:', '  filesystem:', `    rootdirectory: ${JSON.stringify(root)}`, ''].join('\n'));
  const timeFile = `${logFile}.time`;
  const t0 = performance.now();
  const res = await run('/usr/bin/time', ['-f', '%M', '-o', timeFile, DISTRIBUTION, 'garbage-collect', configFile], {
    env: { OTEL_TRACES_EXPORTER: 'none' },
    timeoutMs: 900_000,
  });
  const wallMs = performance.now() - t0;
  writeFileSync(logFile, res.stdout + res.stderr);
  const deleted = (res.stdout.match(/^blob eligible for deletion/gm) ?? []).length;
  return { wallMs, maxRss: Number(readFileSync(timeFile, 'utf8').trim().split('\n').pop()) * 1024, deleted };
}

interface PushRate {
  pushes: number;
  seconds: number;
  perSec: number;
  /** Collections that finished during the pushes (one was running all along). */
  collections: number;
  /** Cores of the whole machine busy during the pushes, on average. */
  busyCores: number;
}

/** `PUSHERS` loops of crane pushes, each of a new small image, for `seconds`; pushes per second. */
async function pushLoad(work: string, server: Server, label: string, seconds: number): Promise<PushRate> {
  const env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
  const host = new URL(server.url).host;
  const t0 = performance.now();
  const machine0 = machineTicks();
  const deadline = t0 + seconds * 1000;
  let next = 0;
  const pusher = async () => {
    while (performance.now() < deadline) {
      const i = next++;
      const image = buildImage({ seed: `gc-bench-push-${label}-${i}`, layers: 2, bigFileSize: 256 * 1024 });
      const layout = writeLayout(join(work, `push-${label}-${i}`), [{ tag: 'v1', item: image }]);
      await run(tool('crane'), ['push', layout, `${host}/root/oci/bench/push/${label}:v${i}`, '--insecure'], { env, timeoutMs: 120_000 });
    }
  };
  await Promise.all(Array.from({ length: PUSHERS }, pusher));
  const elapsed = (performance.now() - t0) / 1000;
  return { pushes: next, seconds: elapsed, perSec: next / elapsed, collections: 0, busyCores: busyCores(machine0, machineTicks(), cpus().length) };
}

/** Runs `collect` again and again until `during` settles, then aborts the one in flight; how many finished. */
async function loopBeside<T>(during: () => Promise<T>, collect: (signal: AbortSignal) => Promise<boolean>): Promise<{ result: T; runs: number }> {
  const stop = new AbortController();
  let runs = 0;
  const loop = (async () => {
    while (!stop.signal.aborted) if (await collect(stop.signal).catch(() => false)) runs++;
  })();
  // The first collection has started before the pushes do.
  await new Promise((r) => setTimeout(r, 300));
  try {
    return { result: await during(), runs };
  } finally {
    stop.abort();
    await loop;
  }
}

/** `velodex gc` in its own process; killed when `signal` aborts (its lease then runs out). */
function collectInProcess(configFile: string, dataDir: string, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, 'gc', '--config', configFile, '--data-dir', dataDir], {
      stdio: 'ignore',
      env: { ...process.env, VELODEX_LOG_LEVEL: 'warn' },
      signal,
      killSignal: 'SIGKILL',
    });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}

interface BackendResult {
  backend: 'fs' | 's3';
  shape: Shape;
  total: number;
  seedSecs: number;
  gc: GcRun;
  distribution?: { wallMs: number; maxRss: number; deleted: number };
  alone: PushRate;
  beside: PushRate;
}

async function measureBackend(backend: 'fs' | 's3', opts: GcBenchOptions, storage: ConfigPart | null): Promise<BackendResult> {
  const { work, logs, token, progress } = opts;
  const total = backend === 'fs' ? opts.blobsFs : opts.blobsS3;
  const shape = shapeOf(total);
  const dataDir = join(work, `gc-${backend}`);
  mkdirSync(dataDir, { recursive: true });
  const tokenFile = join(dataDir, 'upload-token');
  writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  const parts: ConfigPart[] = [...(storage ? [storage] : []), gc({ enabled: false, grace: GRACE_SECS, lease: '1m' }), admin(ADMIN)];
  const configFile = join(dataDir, 'velodex.toml');
  // The same config startVelodexBench writes for the server below.
  writeFileSync(configFile, toml(...parts, hosted('hosted', { token: { file: tokenFile } }), oci.hosted(INDEX, { token: { file: tokenFile } })));

  progress(`gc ${backend}: seeding ${total} blobs (${shape.images} images) ${backend === 'fs' ? "as the fs store's files" : 'through the storage layer'}`);
  const t0 = performance.now();
  const config = loadConfigFile(configFile, { ecosystems, overrides: { dataDir } });
  const target = config.storage.backend === 'fs' ? fsFilesTarget(config.storage.path) : storesTarget(await openStores(config.storage, { scratchDir: join(dataDir, 'scratch') }));
  await seedVelodex(target, shape);
  const seedSecs = (performance.now() - t0) / 1000;
  await new Promise((r) => setTimeout(r, (GRACE_SECS + 1) * 1000));

  progress(`gc ${backend}: velodex gc over ${total} blobs`);
  // The collection's own speed, unpaced (`cpu_share = 1`); the pushes below run beside the default pace.
  const fullSpeedConfig = join(dataDir, 'velodex-full-speed.toml');
  writeFileSync(fullSpeedConfig, readFileSync(configFile, 'utf8').replace('[gc]\n', '[gc]\ncpu_share = 1\n'));
  const gcRun = await velodexGc(fullSpeedConfig, dataDir, join(logs, `gc-probe-${backend}.json`));
  const expected = shape.unreferenced + shape.orphans;
  if (gcRun.blobsDeleted !== expected || gcRun.blobsScanned !== total) {
    throw new Error(`velodex gc on ${backend} listed ${gcRun.blobsScanned} of ${total} blobs and deleted ${gcRun.blobsDeleted}, not the ${expected} seeded unreferenced ones`);
  }

  let distribution: BackendResult['distribution'];
  if (backend === 'fs' && !distributionMissing()) {
    progress(`gc fs: seeding the Distribution registry's layout with ${total} blobs`);
    const root = join(work, 'gc-distribution');
    await seedDistribution(root, shape);
    progress('gc fs: registry garbage-collect');
    distribution = await distributionGc(root, join(work, 'gc-distribution.yml'), join(logs, 'distribution-gc.log'));
    if (distribution.deleted !== expected) throw new Error(`registry garbage-collect deleted ${distribution.deleted} blobs, not the ${expected} seeded unreferenced ones`);
  }

  progress(`gc ${backend}: crane pushes for ${opts.pushSecs} s alone, then ${opts.pushSecs} s beside collections`);
  const server = await startVelodexBench(dataDir, 'warn', join(logs, `velodex-gc-${backend}.log`), parts);
  try {
    await run(tool('crane'), ['auth', 'login', new URL(server.url).host, '-u', '__token__', '--password-stdin', '--insecure'], {
      env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') },
      input: token,
    });
    const alone = await pushLoad(work, server, `${backend}-alone`, opts.pushSecs);
    const collect =
      backend === 'fs'
        ? async (signal: AbortSignal) => {
            const res = await fetch(`${server.url}/+admin/gc`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` }, signal });
            await res.arrayBuffer();
            return res.status === 200;
          }
        : (signal: AbortSignal) => collectInProcess(configFile, dataDir, signal);
    const { result: beside, runs } = await loopBeside(() => pushLoad(work, server, `${backend}-beside`, opts.pushSecs), collect);
    return { backend, shape, total, seedSecs, gc: gcRun, distribution, alone, beside: { ...beside, collections: runs } };
  } finally {
    await server.stop();
  }
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

function table(results: BackendResult[], s3Note: string): string {
  const lines = [
    '### garbage collection: one `velodex gc` over a seeded store (half of it unreferenced)',
    '',
    '| backend | blobs | deleted | time | per blob | store requests / blob | peak RSS | Distribution `garbage-collect` (fs) | velodex / Distribution time |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const r of results) {
    const perBlobMs = r.gc.wallMs / r.total;
    const requests = r.backend === 's3' ? fmt(r.gc.requests / r.total, 2) : 'n/a (files)';
    const d = r.distribution;
    const peer = d ? `${fmt(d.wallMs / 1000, 1)} s, ${fmt(d.maxRss / MiB)} MiB, ${fmt(d.deleted)} deleted` : r.backend === 'fs' ? 'not installed' : 'n/a';
    const ratio = d ? `${fmt(r.gc.wallMs / d.wallMs, 2)}x` : 'n/a';
    lines.push(
      `| ${r.backend} | ${fmt(r.total)} | ${fmt(r.gc.blobsDeleted)} | ${fmt(r.gc.wallMs / 1000, 1)} s | ${fmt(perBlobMs, 3)} ms | ${requests} | ${fmt(r.gc.maxRss / MiB)} MiB | ${peer} | ${ratio} |`,
    );
  }
  lines.push(
    '',
    'time: the whole `velodex gc` process (start, lease, mark, list, judge, delete, exit), wall clock; the collection',
    `itself is what its report says (${results.map((r) => `${r.backend} ${fmt(r.gc.durationMs / 1000, 1)} s`).join(', ')}). Seeding (not measured): ${results
      .map((r) => `${r.backend} ${fmt(r.seedSecs, 0)} s`)
      .join(', ')}. store requests: every HTTP request the process sent to MinIO (lease, listings of 1,000 keys a page,`,
    'holds reads, compare-and-swap writes, deletions), divided by the blobs in the store. peak RSS: the process\'s maximum',
    'resident set (getrusage). The Distribution registry\'s `registry garbage-collect` marks and sweeps the same shape on',
    'its filesystem driver; it must run while that registry is stopped or read-only (uploads started during its run can be',
    'lost), velodex collects while every process serves and accepts pushes.',
    ...(s3Note ? [s3Note] : []),
    '',
    '### pushes with a collection running beside them (crane, 3 at once, each a new image of 2 layers, ~260 KiB)',
    '',
    '| backend | seconds each | pushes alone | pushes/s alone | pushes beside | pushes/s beside a collection | collections finished meanwhile | cores busy alone / beside | beside / alone |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  );
  for (const r of results) {
    lines.push(
      `| ${r.backend} | ${fmt(r.alone.seconds, 0)} / ${fmt(r.beside.seconds, 0)} | ${r.alone.pushes} | ${fmt(r.alone.perSec, 2)} | ${r.beside.pushes} | ${fmt(r.beside.perSec, 2)} | ${r.beside.collections} | ${fmt(r.alone.busyCores, 1)} / ${fmt(r.beside.busyCores, 1)} of ${cpus().length} | ${fmt(r.beside.perSec / r.alone.perSec, 2)}x |`,
    );
  }
  lines.push(
    '',
    'fs: `POST /+admin/gc` in a loop to the very server that takes the pushes (one process: the collection shares its',
    'event loop and the machine\'s two cores); s3: `velodex gc` in a loop in another process on the same bucket. The store',
    'still holds the referenced half of the seeded blobs, so each collection lists and judges them all; a collection was',
    'running during the whole second phase (the one in flight at its end is abandoned). cores busy: the whole machine\'s',
    'CPU time over the phase (/proc/stat): where it nears every core, the collection and the pushes compete for CPU',
    '(crane, the server, MinIO and the collecting process share this machine), not for the store.',
    '',
  );
  return lines.join('\n');
}

/** Both backends (MinIO started and stopped here), as Markdown. */
export async function measureGc(opts: GcBenchOptions): Promise<string> {
  const results: BackendResult[] = [];
  results.push(await measureBackend('fs', opts, null));
  opts.progress('gc s3: starting MinIO');
  const minio = await startMinio();
  try {
    results.push(await measureBackend('s3', opts, s3Storage(minio, { prefix: 'velodex-gc' })));
  } finally {
    await minio.stop();
  }
  const s3Note = opts.blobsS3 < opts.blobsFs ? `s3 over ${fmt(opts.blobsS3)} blobs, not ${fmt(opts.blobsFs)}: on this machine's MinIO seeding and collecting 100k objects would take over ten minutes (BENCH_GC_BLOBS_S3 sets it).` : '';
  return table(results, s3Note);
}
