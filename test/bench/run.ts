/**
 * `make bench`: velodex beside its peers, in one run, on 127.0.0.1, printing ratios.
 *
 *   Python: velodex (embedded default, hosted index `root/hosted`) and pypiserver (on waitress)
 *           serve the same real wheels and sdists; Simple pages (list, detail in HTML, and PEP 691
 *           JSON, which only velodex speaks) and wheel downloads (a small one, a ~20 MiB one).
 *   OCI:    velodex (hosted index `root/oci`) and the Distribution registry hold the same image,
 *           pushed with crane; manifest GET by tag, a small and a large blob GET; and cold and
 *           warm pulls of six images through velodex's cached index beside the Distribution
 *           registry's proxy mode on the same upstream (pull-through.ts).
 *   Large:  the ~20 MiB wheel and the 16 MiB layer beside a bare Node file server serving the same
 *           stored files, at 1 and 8 connections, with curl and with a client that costs nearly
 *           nothing, after page traffic, one velodex process and two workers; CPU per GiB; warm
 *           requests of one and two workers (wrk); peak RSS while 8 clients download a 1 GiB
 *           layer (large-files.ts).
 *   Warm:   manifest GET and cached Simple page with the store on disk and on a RAM disk, with the
 *           file system calls per request counted by strace (warm-reads.ts).
 *   UI:     the compressed script and stylesheet each web UI page's first load moves (ui-weight.ts).
 *   GC:     one `velodex gc` over a seeded store of 100k blobs on fs (beside the Distribution
 *           registry's `garbage-collect`) and 10k on s3, and crane pushes alone vs beside
 *           collections (gc.ts).
 *   Search: the search index at 100k synthetic projects: its memory, queries per second and p99
 *           in process and over `/+search`, its build time after a start, and an upload's time
 *           with and without it (search.ts).
 *
 * Every server logs nothing per request during the comparison; a last section shows what
 * velodex's default `log_level = "info"` (a log line per request) costs.
 *
 * It prints and never judges: no number makes it fail. It exits non-zero only when the setup
 * fails (a server does not start, an upload or push fails, or the two servers do not serve the
 * same bytes). Knobs (bounded): BENCH_DURATION (s per measured run, default 5), BENCH_WARMUP (s of
 * unrecorded load before each, default 1), BENCH_CONNECTIONS (default 10), BENCH_DOWNLOAD_CONNECTIONS
 * (for the large downloads, default 4), BENCH_PAGE_TRAFFIC (s of page traffic before the large-file
 * section, default 60), BENCH_ROUNDS (alternating rounds of the large-file section, default 3),
 * BENCH_GC_BLOBS / BENCH_GC_BLOBS_S3 / BENCH_GC_PUSH_SECS (gc.ts), BENCH_S3_WORKERS (workers of each
 * velodex in the s3 section, default one per core), BENCH_READ_CACHE_MS (the read_cache_ms of its
 * second velodex, default 2000). VELODEX_BENCH_ONLY=gc runs only the GC section (with its own
 * servers and MinIO); VELODEX_BENCH_ONLY=s3 sets up the data as always and measures only the s3
 * section (velodex fs, s3, s3 with read_cache_ms, the Distribution registry on s3, the replicas);
 * VELODEX_BENCH_ONLY=search runs only the search section (BENCH_SEARCH_PROJECTS, BENCH_SEARCH_UPLOADS);
 * VELODEX_BENCH_ONLY=pull-through runs only the pull-through section (its own upstream, proxies and MinIO).
 * Needs curl, strace and wrk (hack/tools.sh installs them).
 */
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { metrics, rateLimit } from '../support/config.js';
import { buildImage, writeLayout, MT, type Blob } from '../support/oci-image.js';
import { REPO, tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { buildBigWheel } from '../python/fixtures/big-wheel.js';
import { measureLargeFiles } from './large-files.js';
import { measurePullThrough } from './pull-through.js';
import { measureUiWeight } from './ui-weight.js';
import { measureWarmReads } from './warm-reads.js';
import { measurePrivateReads } from './private-reads.js';
import { gibLayerRss, measureReplicas, measureS3, startS3Servers, storeCallsPerRequest } from './s3.js';
import { measureGc } from './gc.js';
import { measureSearch } from './search.js';
import { measure, measureDownload, table, type Load, type Measured, type Row, type Target } from './load.js';
import {
  distributionMissing,
  distributionVersion,
  startDistribution,
  startPypiserverBench,
  startVelodexBench,
  stopAll,
  type Server,
} from './servers.js';

const MiB = 1024 * 1024;

function knob(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name}=${raw}: want an integer from ${min} to ${max}`);
  return n;
}

const DURATION = knob('BENCH_DURATION', 5, 1, 30);
const PAGE_TRAFFIC = knob('BENCH_PAGE_TRAFFIC', 60, 0, 600);
const ROUNDS = knob('BENCH_ROUNDS', 3, 1, 9);
const WARMUP = knob('BENCH_WARMUP', 1, 0, 10);
const PAGE_LOAD: Load = { connections: knob('BENCH_CONNECTIONS', 10, 1, 256), duration: DURATION, warmup: WARMUP };
const DOWNLOAD_LOAD: Load = { connections: knob('BENCH_DOWNLOAD_CONNECTIONS', 4, 1, 64), duration: DURATION, warmup: WARMUP };
const GC_BLOBS = knob('BENCH_GC_BLOBS', 100_000, 1_000, 1_000_000);
const GC_BLOBS_S3 = knob('BENCH_GC_BLOBS_S3', 10_000, 1_000, 1_000_000);
/** Worker processes of each velodex in the s3 section: its default here (one per core). */
const S3_WORKERS = knob('BENCH_S3_WORKERS', cpus().length, 1, 64);
/** `[storage] read_cache_ms` of the s3 section's second velodex. */
const READ_CACHE_MS = knob('BENCH_READ_CACHE_MS', 2000, 1, 60_000);
const GC_PUSH_SECS = knob('BENCH_GC_PUSH_SECS', 15, 3, 300);
const SEARCH_PROJECTS = knob('BENCH_SEARCH_PROJECTS', 100_000, 1_000, 1_000_000);
const SEARCH_UPLOADS = knob('BENCH_SEARCH_UPLOADS', 40, 5, 1_000);
const SECTIONS = ['all', 'gc', 's3', 'search', 'pull-through'] as const;
const ONLY = process.env.VELODEX_BENCH_ONLY || 'all';
if (!(SECTIONS as readonly string[]).includes(ONLY)) throw new Error(`VELODEX_BENCH_ONLY=${ONLY}: want one of ${SECTIONS.join(', ')}`);
const BIG_WHEEL_BYTES = 20 * MiB;
const BIG_LAYER_FILE_BYTES = 16 * MiB;

const progress = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

// --- checks: both servers must serve the same thing before either is measured -------------------

interface Fetched {
  status: number;
  headers: Headers;
  body: Buffer;
}

async function get(target: Target): Promise<Fetched> {
  const res = await fetch(target.url, { headers: target.headers ?? {}, redirect: 'manual' });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

/** Fetches the target once; a wrong answer is a setup error, not a result. */
async function expectOk(label: string, target: Target, check: (f: Fetched) => string | undefined): Promise<Fetched> {
  const f = await get(target);
  const problem = f.status !== 200 ? `status ${f.status}: ${f.body.subarray(0, 300).toString()}` : check(f);
  if (problem) throw new Error(`${label}: GET ${target.url}: ${problem}`);
  return f;
}

const containsAll = (names: string[]) => (f: Fetched) => {
  const text = f.body.toString();
  const missing = names.filter((n) => !text.includes(n));
  return missing.length ? `does not list ${missing.join(', ')}` : undefined;
};

const sameBytes = (expected: Buffer) => (f: Fetched) =>
  f.body.equals(expected) ? undefined : `${f.body.length} bytes that differ from the ${expected.length} expected`;

/** The absolute URL of the link to `filename` on a Simple HTML page (fragment dropped). */
function linkTo(page: Fetched, pageUrl: string, filename: string): string {
  for (const m of page.body.toString().matchAll(/href="([^"]+)"/g)) {
    const href = (m[1] ?? '').replace(/&amp;/g, '&');
    const url = new URL(href, pageUrl);
    url.hash = '';
    if (decodeURIComponent(basename(url.pathname)) === filename) return url.toString();
  }
  throw new Error(`${pageUrl} has no link to ${filename}`);
}

// --- scenarios ---------------------------------------------------------------------------------

interface Scenario {
  name: string;
  load: Load;
  velodex: Target;
  peer?: Target;
  peerNote?: string;
  byThroughput?: boolean;
}

async function measureAll(peerName: string, scenarios: Scenario[]): Promise<Row[]> {
  const rows: Row[] = [];
  for (const s of scenarios) {
    progress(`${s.name}: velodex`);
    const how = s.byThroughput ? measureDownload : measure;
    const velodex = await how(s.velodex, s.load);
    let peer: Measured | undefined;
    if (s.peer) {
      progress(`${s.name}: ${peerName}`);
      peer = await how(s.peer, s.load);
    }
    rows.push({ scenario: s.name, connections: s.load.connections, velodex, peer, peerNote: s.peerNote, byThroughput: s.byThroughput });
  }
  return rows;
}

const HTML = { accept: 'text/html' };
const PEP691 = { accept: 'application/vnd.pypi.simple.v1+json' };
const OCI_ACCEPT = { accept: [MT.manifest, MT.index, 'application/vnd.docker.distribution.manifest.v2+json'].join(', ') };

// --- Python ------------------------------------------------------------------------------------

interface PythonSetup {
  scenarios: Scenario[];
  /** Every file uploaded to velodex, for uploading them again to another velodex. */
  files: string[];
  /** The ~20 MiB wheel's download and its bytes. */
  bigWheel: { target: Target; bytes: Buffer };
  /** The detail-page scenario, re-measured at log_level info. */
  detail: Scenario;
  /** pypiserver's Simple API root (the upstream of the warm-read section's cached index). */
  peerSimple: string;
}

async function setupPython(work: string, velodex: Server, token: string, pypi: (dir: string) => Promise<Server>): Promise<PythonSetup> {
  progress('building the projects (python -m build) and a ~20 MiB wheel');
  const alphaVersions = ['1.0', '1.1', '1.2', '1.3', '2.0'];
  const projects: BuiltProject[] = [];
  for (const v of alphaVersions) projects.push(await buildProject('alpha', v));
  for (const name of ['beta', 'gamma', 'delta']) projects.push(await buildProject(name, '1.0'));
  const big = await buildBigWheel(work, BIG_WHEEL_BYTES);
  const files = [...projects.flatMap((p) => [p.wheel, p.sdist]), big.path];

  progress(`uploading ${files.length} files to velodex with twine`);
  await run(
    tool('twine'),
    ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${velodex.url}/root/hosted/`, '-u', '__token__', '-p', token, ...files],
    { timeoutMs: 300_000 },
  );
  const packages = join(work, 'pypiserver-packages');
  mkdirSync(packages);
  for (const f of files) copyFileSync(f, join(packages, basename(f)));
  const peer = await pypi(packages);

  const alpha = projects.filter((p) => p.name === 'alpha');
  const alphaFiles = alpha.flatMap((p) => [p.wheelFilename, p.sdistFilename]);
  const small = alpha[0];
  if (!small) throw new Error('no alpha build');
  const smallBytes = readFileSync(small.wheel);
  const bigBytes = readFileSync(big.path);

  const v = (path: string, headers = HTML): Target => ({ url: `${velodex.url}/root/hosted${path}`, headers });
  const p = (path: string): Target => ({ url: `${peer.url}${path}`, headers: HTML });

  progress('checking that both serve the same projects and files');
  for (const [label, t] of [['velodex', v('/simple/')], ['pypiserver', p('/simple/')]] as const) {
    await expectOk(`${label} project list`, t, containsAll(['alpha', 'beta', 'gamma', 'delta', 'bigwheel']));
  }
  const vDetail = await expectOk('velodex detail', v('/simple/alpha/'), containsAll(alphaFiles));
  const pDetail = await expectOk('pypiserver detail', p('/simple/alpha/'), (f) =>
    f.headers.get('server') === 'waitress' ? containsAll(alphaFiles)(f) : `served by "${f.headers.get('server')}", not waitress`,
  );
  await expectOk('velodex PEP 691 detail', v('/simple/alpha/', PEP691), (f) => {
    const doc = JSON.parse(f.body.toString()) as { files?: { filename: string }[] };
    const got = (doc.files ?? []).map((x) => x.filename).sort();
    return JSON.stringify(got) === JSON.stringify([...alphaFiles].sort()) ? undefined : `lists ${got.join(', ')}`;
  });
  const vBigPage = await expectOk('velodex bigwheel page', v('/simple/bigwheel/'), containsAll([big.filename]));
  const pBigPage = await expectOk('pypiserver bigwheel page', p('/simple/bigwheel/'), containsAll([big.filename]));

  const download = (page: Fetched, pageUrl: string, filename: string): Target => ({ url: linkTo(page, pageUrl, filename) });
  const vSmall = download(vDetail, v('/simple/alpha/').url, small.wheelFilename);
  const pSmall = download(pDetail, p('/simple/alpha/').url, small.wheelFilename);
  const vBig = download(vBigPage, v('/simple/bigwheel/').url, big.filename);
  const pBig = download(pBigPage, p('/simple/bigwheel/').url, big.filename);
  await expectOk('velodex small wheel', vSmall, sameBytes(smallBytes));
  await expectOk('pypiserver small wheel', pSmall, sameBytes(smallBytes));
  await expectOk('velodex big wheel', vBig, sameBytes(bigBytes));
  await expectOk('pypiserver big wheel', pBig, sameBytes(bigBytes));

  const detail: Scenario = { name: `Simple detail, HTML (${alphaFiles.length} files)`, load: PAGE_LOAD, velodex: v('/simple/alpha/'), peer: p('/simple/alpha/') };
  return {
    detail,
    peerSimple: `${peer.url}/simple/`,
    files,
    bigWheel: { target: vBig, bytes: bigBytes },
    scenarios: [
      { name: 'Simple project list, HTML (5 projects)', load: PAGE_LOAD, velodex: v('/simple/'), peer: p('/simple/') },
      detail,
      {
        name: `Simple detail, PEP 691 JSON (${alphaFiles.length} files)`,
        load: PAGE_LOAD,
        velodex: v('/simple/alpha/', PEP691),
        peerNote: 'n/a (HTML only)',
      },
      { name: `wheel download, ${(smallBytes.length / 1024).toFixed(1)} KiB`, load: PAGE_LOAD, velodex: vSmall, peer: pSmall },
      { name: `wheel download, ${(bigBytes.length / MiB).toFixed(1)} MiB`, load: DOWNLOAD_LOAD, velodex: vBig, peer: pBig, byThroughput: true },
    ],
  };
}

// --- OCI ---------------------------------------------------------------------------------------

interface OciImage {
  layoutDir: string;
  manifest: Blob;
  config: Blob;
  bigLayer: Blob;
}

function makeImage(work: string): OciImage {
  const image = buildImage({ seed: 'velodex-bench', layers: 2, bigFileSize: BIG_LAYER_FILE_BYTES });
  const bigLayer = image.layers[image.layers.length - 1];
  if (!bigLayer) throw new Error('image without layers');
  const layoutDir = writeLayout(join(work, 'oci-layout'), [{ tag: 'v1', item: image }]);
  return { layoutDir, manifest: image.manifest, config: image.config, bigLayer };
}

async function crane(work: string, args: string[], input?: string): Promise<void> {
  await run(tool('crane'), [...args, '--insecure'], { env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, input, timeoutMs: 300_000 });
}

/** Pushes the image to `repoUrl` (`http://host:port/v2/<name>` form is derived) and checks it. */
async function pushAndTargets(work: string, label: string, server: Server, name: string, image: OciImage): Promise<{ manifest: Target; config: Target; big: Target }> {
  const host = new URL(server.url).host;
  progress(`pushing the image to ${label} with crane`);
  await crane(work, ['push', image.layoutDir, `${host}/${name}:v1`]);
  const manifest: Target = { url: `${server.url}/v2/${name}/manifests/v1`, headers: OCI_ACCEPT };
  const config: Target = { url: `${server.url}/v2/${name}/blobs/${image.config.descriptor.digest}` };
  const big: Target = { url: `${server.url}/v2/${name}/blobs/${image.bigLayer.descriptor.digest}` };
  await expectOk(`${label} manifest`, manifest, (f) => {
    if (f.headers.get('docker-content-digest') !== image.manifest.descriptor.digest) return `Docker-Content-Digest ${f.headers.get('docker-content-digest')}`;
    return sameBytes(image.manifest.bytes)(f);
  });
  await expectOk(`${label} config blob`, config, sameBytes(image.config.bytes));
  await expectOk(`${label} layer blob`, big, sameBytes(image.bigLayer.bytes));
  return { manifest, config, big };
}

// --- main --------------------------------------------------------------------------------------

const loadAverage = () => loadavg().map((n) => n.toFixed(2)).join(' ');

function version(cmd: string, args: string[]): Promise<string> {
  return run(cmd, args, { allowFailure: true }).then((r) => (r.stdout + r.stderr).trim().split('\n')[0] ?? '?');
}

/**
 * What `/metrics` (a counter and a histogram per request) and the rate limiter (a classification
 * and a window per request, with budgets too large to refuse anything) cost on warm paths: the
 * same data dir, restarted with both off, with metrics on (the default), and with both on.
 */
const UNBOUNDED = { requests: 1_000_000_000, windowSecs: 60 };
const SURFACES = [
  { label: 'both off', config: [metrics({ enabled: false })] },
  { label: 'metrics on', config: [] },
  { label: 'metrics + limiter on', config: [rateLimit({ enabled: true, read: UNBOUNDED, download: UNBOUNDED, write: UNBOUNDED, admin: UNBOUNDED })] },
] as const;

async function surfacesCost(dataDir: string, logs: string, scenarios: { name: string; target: Target; load: Load; byThroughput?: boolean }[]): Promise<void> {
  const results: Measured[][] = scenarios.map(() => []);
  for (const [i, surface] of SURFACES.entries()) {
    const server = await startVelodexBench(dataDir, 'warn', join(logs, `velodex-surfaces-${i}.log`), surface.config);
    const at = (t: Target): Target => ({ ...t, url: t.url.replace(/^http:\/\/[^/]+/, server.url) });
    for (const [j, s] of scenarios.entries()) {
      progress(`${s.name}: velodex with ${surface.label}`);
      results[j]!.push(s.byThroughput ? await measureDownload(at(s.target), s.load) : await measure(at(s.target), s.load));
    }
    await server.stop();
  }
  const rate = (m: Measured, byThroughput?: boolean) => (byThroughput ? m.bytesPerSec / MiB : m.reqPerSec);
  console.log('### velodex surfaces: /metrics and the rate limiter, on vs off (req/s, or MiB/s for the layer)');
  console.log('');
  console.log(`| scenario | ${SURFACES.map((s) => s.label).join(' | ')} | metrics on / off | limiter on too / off |`);
  console.log(`|---|${SURFACES.map(() => '--:').join('|')}|--:|--:|`);
  for (const [j, s] of scenarios.entries()) {
    const [off, metrics, both] = results[j]!.map((m) => rate(m, s.byThroughput));
    const fmt = (n: number | undefined) => Math.round(n ?? 0).toLocaleString('en-US');
    const ratio = (a: number | undefined) => `${((a ?? 0) / (off ?? 1)).toFixed(2)}x`;
    console.log(`| ${s.name} | ${fmt(off)} | ${fmt(metrics)} | ${fmt(both)} | ${ratio(metrics)} | ${ratio(both)} |`);
  }
  console.log('');
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'velodex-bench-'));
  const logs = join(work, 'logs');
  mkdirSync(logs);
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await stopAll();
    rmSync(work, { recursive: true, force: true });
  };
  const onSignal = (signal: NodeJS.Signals) => {
    progress(`${signal}: stopping the servers`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    const velodexVersion = (JSON.parse(readFileSync(join(REPO, 'registry', 'package.json'), 'utf8')) as { version: string }).version;
    const pypiVersion = await version(tool('pypi-server'), ['--version']);
    const waitressVersion = await version(tool('python'), ['-c', 'import importlib.metadata as m; print(m.version("waitress"))']);
    const missing = distributionMissing();
    const cpu = cpus();
    console.log(`# velodex bench, ${new Date().toISOString()}`);
    console.log('');
    console.log(`machine: ${cpu.length} x ${cpu[0]?.model.trim() ?? '?'}, Node ${process.version}, ${process.platform}/${process.arch}; ` +
      `load average at start ${loadAverage()} (anything else running skews every number)`);
    const watchdog = await run(tool('python'), ['-c', 'import watchdog'], { allowFailure: true });
    const backend = watchdog.code === 0 ? 'cached-dir backend' : 'simple-dir backend: no watchdog, so no listing cache';
    console.log(`servers: velodex ${velodexVersion}; pypiserver ${pypiVersion} on waitress ${waitressVersion} (${backend}); ` +
      (missing ? 'no OCI peer' : `Distribution registry ${distributionVersion()}`));
    console.log(`load: in the bench process, loopback only; ${DURATION} s measured after ${WARMUP} s warm-up per run; autocannon with ` +
      `${PAGE_LOAD.connections} connections, large downloads with Node's HTTP client on ${DOWNLOAD_LOAD.connections} connections`);
    console.log('');

    const gcSection = (token: string) =>
      measureGc({ work, logs, token, blobsFs: GC_BLOBS, blobsS3: GC_BLOBS_S3, pushSecs: GC_PUSH_SECS, progress });
    if (ONLY === 'gc') {
      console.log(await gcSection(randomBytes(16).toString('hex')));
      console.log(`load average at the end: ${loadAverage()}`);
      return;
    }
    const searchSection = () => measureSearch({ work, logs, projects: SEARCH_PROJECTS, uploads: SEARCH_UPLOADS, load: PAGE_LOAD, progress });
    if (ONLY === 'search') {
      console.log(await searchSection());
      console.log(`load average at the end: ${loadAverage()}`);
      return;
    }
    if (ONLY === 'pull-through') {
      console.log(await measurePullThrough(work, logs, progress));
      console.log(`load average at the end: ${loadAverage()}`);
      return;
    }

    const velodexData = join(work, 'velodex-data');
    let velodex = await startVelodexBench(velodexData, 'warn', join(logs, 'velodex.log'));
    const token = readFileSync(join(velodexData, 'upload-token'), 'utf8').trim();

    // Python
    const py = await setupPython(work, velodex, token, (dir) => startPypiserverBench(dir, join(logs, 'pypiserver.log')));
    // VELODEX_BENCH_ONLY=s3: the data is set up as for every section, only the s3 one is measured.
    const measuring = ONLY === 'all';
    const pyRows = measuring ? await measureAll('pypiserver', py.scenarios) : [];
    if (measuring) console.log(table('Python: velodex vs pypiserver', 'pypiserver', pyRows) + '\n');

    // OCI
    const image = makeImage(work);
    progress('logging crane in to velodex');
    await crane(work, ['auth', 'login', new URL(velodex.url).host, '-u', '__token__', '--password-stdin'], token);
    const v = await pushAndTargets(work, 'velodex', velodex, 'root/oci/bench/app', image);
    let d: { manifest: Target; config: Target; big: Target } | undefined;
    if (!missing) {
      const registry = await startDistribution(join(work, 'distribution-data'), join(work, 'distribution.yml'), join(logs, 'distribution.log'));
      d = await pushAndTargets(work, 'distribution', registry, 'bench/app', image);
    }
    const note = 'no peer';
    const ociRows = !measuring ? [] : await measureAll('distribution', [
      { name: 'manifest GET by tag', load: PAGE_LOAD, velodex: v.manifest, peer: d?.manifest, peerNote: note },
      { name: `blob GET, config (${image.config.bytes.length} B)`, load: PAGE_LOAD, velodex: v.config, peer: d?.config, peerNote: note },
      { name: `blob GET, layer (${(image.bigLayer.bytes.length / MiB).toFixed(1)} MiB)`, load: DOWNLOAD_LOAD, velodex: v.big, peer: d?.big, peerNote: note, byThroughput: true },
    ]);
    if (measuring) {
      console.log(table('OCI: velodex vs the Distribution registry', 'distribution', ociRows));
      if (missing) console.log(`\nNo OCI peer was measured: ${missing}. The velodex column stands alone; no ratio is given.`);
      console.log('');
      // Pull-through: velodex's cached index beside the Distribution registry's proxy mode.
      console.log(await measurePullThrough(work, logs, progress));
    }

    // The s3 backend: velodex on MinIO beside velodex on fs and the Distribution registry on MinIO.
    // Every velodex of this section runs its default worker count on this machine (one per core),
    // as a pod does, so the fs reference is restarted with as many.
    await velodex.stop();
    velodex = await startVelodexBench(velodexData, 'warn', join(logs, 'velodex-workers.log'), undefined, S3_WORKERS);
    const s3 = await startS3Servers(work, logs, token, !missing, { workers: S3_WORKERS, readCacheMs: READ_CACHE_MS }, progress);
    try {
      progress('uploading the same files to velodex on s3 with twine');
      await run(
        tool('twine'),
        ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${s3.velodex.url}/root/hosted/`, '-u', '__token__', '-p', token, ...py.files],
        { timeoutMs: 300_000 },
      );
      const onS3 = (t: Target): Target => ({ ...t, url: t.url.replace(/^http:\/\/[^/]+/, s3.velodex.url) });
      await expectOk('velodex s3 big wheel', onS3(py.bigWheel.target), sameBytes(py.bigWheel.bytes));
      await crane(work, ['auth', 'login', new URL(s3.velodex.url).host, '-u', '__token__', '--password-stdin'], token);
      await pushAndTargets(work, 'velodex s3', s3.velodex, 'root/oci/bench/app', image);
      const ds3 = s3.distribution ? await pushAndTargets(work, 'distribution s3', s3.distribution, 'bench/app', image) : undefined;
      const layerName = `blob GET, layer (${(image.bigLayer.bytes.length / MiB).toFixed(1)} MiB)`;
      console.log(
        await measureS3(s3, velodex, [
          { name: 'manifest GET by tag', load: PAGE_LOAD, fs: v.manifest, distribution: ds3?.manifest },
          { name: layerName, load: DOWNLOAD_LOAD, fs: v.big, distribution: ds3?.big, byThroughput: true },
          { name: py.detail.name, load: PAGE_LOAD, fs: py.detail.velodex },
          { name: `wheel download, ${(py.bigWheel.bytes.length / MiB).toFixed(1)} MiB`, load: DOWNLOAD_LOAD, fs: py.bigWheel.target, byThroughput: true },
        ], progress),
      );
      const manifestRead = { name: 'manifest GET by tag', target: v.manifest };
      const pageRead = { name: py.detail.name, target: py.detail.velodex };
      const configRead = { name: `blob GET, config (${image.config.bytes.length} B)`, target: v.config };
      const wheelRead = { name: `wheel download, ${(py.bigWheel.bytes.length / MiB).toFixed(1)} MiB`, target: py.bigWheel.target };
      console.log(await storeCallsPerRequest(s3, work, [manifestRead, configRead, pageRead, wheelRead]));
      console.log(await measureReplicas(s3, [manifestRead, pageRead], PAGE_LOAD, progress));
      const basic = `Basic ${Buffer.from(`__token__:${token}`).toString('base64')}`;
      console.log(
        await gibLayerRss(
          [
            { label: 'velodex fs', server: velodex, repo: 'root/oci/bench/gib', auth: basic },
            { label: 'velodex s3', server: s3.velodex, repo: 'root/oci/bench/gib', auth: basic },
            ...(s3.distribution ? [{ label: 'distribution s3', server: s3.distribution, repo: 'bench/gib' }] : []),
          ],
          progress,
        ),
      );
    } finally {
      await s3.stop();
    }
    if (!measuring) {
      console.log(`load average at the end: ${loadAverage()}`);
      return;
    }

    // What velodex's default per-request logging costs: the same data dir, restarted at info.
    await velodex.stop();
    velodex = await startVelodexBench(velodexData, 'info', join(logs, 'velodex-info.log'));
    const at = (t: Target): Target => ({ ...t, url: t.url.replace(/^http:\/\/[^/]+/, velodex.url) });
    const infoRows: { name: string; warn: Measured; info: Measured }[] = [];
    for (const [name, warnRow, target] of [
      [py.detail.name, pyRows[1], py.detail.velodex],
      ['manifest GET by tag', ociRows[0], v.manifest],
    ] as const) {
      if (!warnRow) continue;
      progress(`${name}: velodex at log_level info`);
      infoRows.push({ name, warn: warnRow.velodex, info: await measure(at(target), PAGE_LOAD) });
    }
    await velodex.stop();
    console.log('### velodex request logging: log_level "warn" (above) vs "info" (its default: a JSON line per request, to a file)');
    console.log('');
    console.log('| scenario | warn req/s | info req/s | info / warn | info p99 ms |');
    console.log('|---|--:|--:|--:|--:|');
    for (const r of infoRows) {
      const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
      console.log(`| ${r.name} | ${fmt(r.warn.reqPerSec)} | ${fmt(r.info.reqPerSec)} | ${(r.info.reqPerSec / r.warn.reqPerSec).toFixed(2)}x | ${fmt(r.info.p99Ms)} |`);
    }
    console.log('');

    await surfacesCost(velodexData, logs, [
      { name: py.detail.name, target: py.detail.velodex, load: PAGE_LOAD },
      { name: 'manifest GET by tag', target: v.manifest, load: PAGE_LOAD },
      { name: `blob GET, layer (${(image.bigLayer.bytes.length / MiB).toFixed(1)} MiB)`, target: v.big, load: DOWNLOAD_LOAD, byThroughput: true },
    ]);
    // Large downloads beside a bare Node file server; then warm reads with
    // the store on a RAM disk and on disk.
    const path = (t: Target) => {
      const u = new URL(t.url);
      return u.pathname + u.search;
    };
    const stored = (hex: string) => join(velodexData, 'store', 'blobs', 'sha256', hex.slice(0, 2), hex);
    const wheelHex = createHash('sha256').update(py.bigWheel.bytes).digest('hex');
    console.log(
      await measureLargeFiles({
        dataDir: velodexData,
        logs,
        files: [
          { label: `wheel ${(py.bigWheel.bytes.length / MiB).toFixed(1)} MiB`, path: path(py.bigWheel.target), stored: stored(wheelHex), bytes: py.bigWheel.bytes.length },
          {
            label: `layer ${(image.bigLayer.bytes.length / MiB).toFixed(1)} MiB`,
            path: path(v.big),
            stored: stored(image.bigLayer.descriptor.digest.replace('sha256:', '')),
            bytes: image.bigLayer.bytes.length,
          },
        ],
        pages: [
          { path: path(py.detail.velodex), headers: HTML },
          { path: path(v.manifest), headers: OCI_ACCEPT },
        ],
        requests: [
          { label: py.detail.name, path: path(py.detail.velodex), headers: HTML },
          { label: 'manifest GET by tag', path: path(v.manifest), headers: OCI_ACCEPT },
          { label: `blob GET, config (${image.config.bytes.length} B)`, path: path(v.config) },
        ],
        pageTrafficSecs: PAGE_TRAFFIC,
        duration: DURATION,
        warmup: WARMUP,
        rounds: ROUNDS,
        gib: { repo: 'root/oci/bench/gib-download', auth: `Basic ${Buffer.from(`__token__:${token}`).toString('base64')}` },
        progress,
      }),
    );
    console.log(
      await measureWarmReads({
        work,
        logs,
        token,
        upstreamSimple: py.peerSimple,
        project: 'alpha',
        pushImage: async (label, server, name) => {
          if (label.startsWith('velodex')) await crane(work, ['auth', 'login', new URL(server.url).host, '-u', '__token__', '--password-stdin'], token);
          return (await pushAndTargets(work, label, server, name, image)).manifest;
        },
        distribution: missing ? undefined : (rootDir, label) => startDistribution(rootDir, `${rootDir}.yml`, join(logs, `${label.replace(/\W+/g, '-')}.log`)),
        load: PAGE_LOAD,
        progress,
      }),
    );
    console.log(
      await measurePrivateReads({
        work,
        logs,
        token,
        upstreamSimple: py.peerSimple,
        project: 'alpha',
        pushImage: async (server, name) => {
          const host = new URL(server.url).host;
          await crane(work, ['auth', 'login', host, '-u', '__token__', '--password-stdin'], token);
          progress(`pushing the image to ${name} with crane`);
          await crane(work, ['push', image.layoutDir, `${host}/${name}:v1`]);
          return { url: `${server.url}/v2/${name}/manifests/v1`, headers: OCI_ACCEPT };
        },
        load: PAGE_LOAD,
        rounds: ROUNDS,
        progress,
      }),
    );
    const ui = await startVelodexBench(velodexData, 'warn', join(logs, 'velodex-ui.log'));
    try {
      console.log(await measureUiWeight(ui.url));
    } finally {
      await ui.stop();
    }
    console.log(await gcSection(token));
    console.log(await searchSection());
    console.log(`load average at the end: ${loadAverage()}`);
    progress('done; stopping the servers and removing the temp dir');
  } finally {
    await cleanup();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

main().catch((err: unknown) => {
  console.error(`bench setup failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
});
