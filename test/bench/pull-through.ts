/**
 * The pull-through section of `make bench`: six multi-layer images on one upstream (a
 * Distribution registry), pulled cold and then warm through velodex's cached OCI index and
 * through the Distribution registry's own proxy mode on the same upstream. A pull is six `crane
 * pull`s at once, as a node starting a pod of six containers would; the time is the wall time of
 * all six. Warm pulls are measured three times and the median is printed. velodex's index keeps
 * its default `cache_ttl_secs` (300), so a warm pull asks the upstream nothing; the Distribution
 * proxy keeps its defaults (its tag lookups go to the upstream).
 *
 * Run alone: `node --import tsx test/bench/pull-through.ts` (after `make build bench-tools`).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { oci, s3Storage } from '../support/config.js';
import { startMinio, type Minio } from '../support/minio.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { busyCores, cpuTime, machineTicks, mainThreads, type MainThreads } from './process-stats.js';
import { distributionS3Driver } from './s3.js';
import { distributionMissing, distributionVersion, startDistribution, startVelodexBench, stopAll, type Server } from './servers.js';

const IMAGES = 6;
const WARM_RUNS = 3;
/**
 * velodex runs twice, on empty stores: as one process, and with its default worker count here
 * (one per core, as a pod runs it; the Go proxy uses every core too).
 */
const WORKER_COUNTS = [...new Set([1, cpus().length])];
const MiB = 1024 * 1024;

async function crane(work: string, args: string[]): Promise<void> {
  await run(tool('crane'), [...args, '--insecure'], { env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, timeoutMs: 600_000 });
}

/** Wall time of pulling every image at once from `prefix/<repo>:v1`, in ms. */
async function pullAll(work: string, prefix: string, repos: string[], round: string): Promise<number> {
  const started = performance.now();
  await Promise.all(repos.map((repo, i) => crane(work, ['pull', '--format', 'oci', `${prefix}/${repo}:v1`, join(work, 'pulls', round, String(i))])));
  const ms = performance.now() - started;
  rmSync(join(work, 'pulls', round), { recursive: true, force: true });
  return ms;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

interface PullResult {
  cold: number;
  warm: number;
  /** CPU seconds of the server's processes for the cold pull, and the median of the warm ones. */
  cpu: { cold: number; warm: number };
  /** Cores of the whole machine busy during the cold pull, and the median of the warm ones. */
  cores: { cold: number; warm: number };
  /** What the server's main threads did during the cold pull (for velodex: its event loops). */
  coldMain: MainThreads;
}

/**
 * Cold, then warm (median of `WARM_RUNS`) pulls of every image through `prefix`, after unmeasured
 * pulls of other images, `IMAGES` at a time (so each server's first-request work, code
 * compilation for velodex, is not in the cold figure: that is the steady state of a pod that has
 * served before).
 */
async function pullRounds(work: string, name: string, server: Server, prefix: string, repos: string[], firstRepos: string[], progress: (msg: string) => void): Promise<PullResult> {
  const cpu = () => {
    const t = cpuTime(server.pid);
    return t.user + t.system;
  };
  progress(`${name}: unmeasured pulls of other images`);
  for (let i = 0; i < firstRepos.length; i += IMAGES) await pullAll(work, prefix, firstRepos.slice(i, i + IMAGES), `${server.name}-first`);
  progress(`${name}: cold pull of ${IMAGES} images`);
  const pull = async (round: string) => {
    const [cpuBefore, machineBefore, mainBefore] = [cpu(), machineTicks(), mainThreads(server.pid)];
    const ms = await pullAll(work, prefix, repos, `${server.name}-${round}`);
    const mainAfter = mainThreads(server.pid);
    const main = { threads: mainAfter.threads, running: mainAfter.running - mainBefore.running, waiting: mainAfter.waiting - mainBefore.waiting };
    return { ms, cpu: cpu() - cpuBefore, cores: busyCores(machineBefore, machineTicks(), cpus().length), main };
  };
  const cold = await pull('cold');
  const warm: { ms: number; cpu: number; cores: number }[] = [];
  for (let r = 0; r < WARM_RUNS; r++) {
    progress(`${name}: warm pull ${r + 1}/${WARM_RUNS}`);
    warm.push(await pull(`warm-${r}`));
  }
  const mid = (f: (w: { ms: number; cpu: number; cores: number }) => number) => median(warm.map(f));
  return {
    cold: cold.ms,
    warm: mid((w) => w.ms),
    cpu: { cold: cold.cpu, warm: mid((w) => w.cpu) },
    cores: { cold: cold.cores, warm: mid((w) => w.cores) },
    coldMain: cold.main,
  };
}

/** velodex's cached index and the Distribution proxy on one backend, both over `upstream`. */
async function measureBackend(
  work: string,
  logs: string,
  backend: 'fs' | 's3',
  upstream: Server,
  repos: string[],
  firstRepos: string[],
  progress: (msg: string) => void,
): Promise<{ velodex: PullResult[]; proxy: PullResult }> {
  let minio: Minio | undefined;
  try {
    let proxyDriver: string[] | undefined;
    if (backend === 's3') {
      minio = await startMinio();
      const bucket = await minio.makeBucket('proxy');
      proxyDriver = distributionS3Driver(minio, bucket);
    }
    const proxy = await startDistribution(join(work, `pt-proxy-${backend}`), join(work, `pt-proxy-${backend}.yml`), join(logs, `pt-proxy-${backend}.log`), proxyDriver, `distribution proxy (${backend})`, [
      'proxy:',
      `  remoteurl: ${upstream.url}`,
    ]);
    try {
      const velodex: PullResult[] = [];
      for (const workers of WORKER_COUNTS) {
        // Each on a store of its own, so each starts cold.
        const name = `${backend}-${workers}w`;
        const dataDir = join(work, `pt-velodex-${name}`);
        mkdirSync(dataDir, { recursive: true });
        writeFileSync(join(dataDir, 'upload-token'), 'bench-token\n');
        const own = minio ? [s3Storage(minio, { prefix: `pull-through-${workers}w` })] : [];
        const server = await startVelodexBench(dataDir, 'warn', join(logs, `pt-velodex-${name}.log`), [...own, oci.cached('hub', upstream.url, { route: 'hub' })], workers);
        try {
          velodex.push(await pullRounds(work, `velodex (cached index, ${backend}, ${workers} worker${workers === 1 ? '' : 's'})`, server, `${new URL(server.url).host}/hub`, repos, firstRepos, progress));
        } finally {
          await server.stop();
        }
      }
      return { velodex, proxy: await pullRounds(work, `Distribution proxy (${backend})`, proxy, new URL(proxy.url).host, repos, firstRepos, progress) };
    } finally {
      await proxy.stop();
    }
  } finally {
    await minio?.stop();
  }
}

/** Runs the section and returns its Markdown. */
export async function measurePullThrough(work: string, logs: string, progress: (msg: string) => void): Promise<string> {
  const missing = distributionMissing();
  if (missing) return `### OCI pull-through\n\nNot measured: ${missing}. Its upstream is a Distribution registry.\n`;
  mkdirSync(join(work, 'pulls'), { recursive: true });
  const upstream = await startDistribution(join(work, 'pt-upstream'), join(work, 'pt-upstream.yml'), join(logs, 'pt-upstream.log'), undefined, 'upstream');
  const repos: string[] = [];
  let bytes = 0;
  const push = async (seed: string, repo: string) => {
    const image = buildImage({ seed, layers: 4, bigFileSize: 4 * MiB });
    const layout = writeLayout(join(work, `pt-layout-${seed}`), [{ tag: 'v1', item: image }]);
    progress(`pushing ${repo} to the upstream`);
    await crane(work, ['push', layout, `${new URL(upstream.url).host}/${repo}:v1`]);
    return [image.config, ...image.layers].reduce((n, b) => n + b.bytes.length, 0);
  };
  for (let i = 0; i < IMAGES; i++) {
    const repo = `bench/image-${i}`;
    bytes += await push(`bench-pull-${i}`, repo);
    repos.push(repo);
  }
  // Pulled first, unmeasured, by each server, six at a time (so every worker of velodex serves
  // some). Twice as many as measured: after only three images, V8 was still compiling velodex's
  // code during the cold pull (about 0.05 s of its CPU then, by perf and by an A/B of the count).
  const firstRepos = Array.from({ length: 2 * IMAGES }, (_, i) => `bench/first-${i}`);
  for (const [i, repo] of firstRepos.entries()) await push(`bench-pull-first-${i}`, repo);

  const results: Record<string, { velodex: PullResult[]; proxy: PullResult }> = {};
  try {
    for (const backend of ['fs', 's3'] as const) results[backend] = await measureBackend(work, logs, backend, upstream, repos, firstRepos, progress);
  } finally {
    await upstream.stop();
  }

  const s = (ms: number) => (ms / 1000).toFixed(2);
  const lines = [
    `### OCI pull-through: ${IMAGES} images (${(bytes / MiB).toFixed(1)} MiB of blobs), pulled at once with crane; Distribution registry ${distributionVersion()} as upstream and as proxy`,
    '',
    '| backend | pull | velodex workers | velodex s | Distribution proxy s | proxy / velodex | velodex CPU s | proxy CPU s | velodex CPU, cold / warm | cores busy (machine): velodex; proxy |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const [backend, { velodex, proxy: d }] of Object.entries(results)) {
    for (const kind of ['cold', 'warm'] as const) {
      velodex.forEach((v, i) => {
        const pull = kind === 'cold' ? 'cold (empty cache)' : `warm (median of ${WARM_RUNS})`;
        const coldOverWarm = kind === 'cold' ? `${(v.cpu.cold / v.cpu.warm).toFixed(1)}x` : '';
        const cores = `${v.cores[kind].toFixed(1)}; ${d.cores[kind].toFixed(1)} of ${cpus().length}`;
        lines.push(`| ${backend} | ${pull} | ${WORKER_COUNTS[i]} | ${s(v[kind])} | ${s(d[kind])} | ${(d[kind] / v[kind]).toFixed(2)}x | ${v.cpu[kind].toFixed(2)} | ${d.cpu[kind].toFixed(2)} | ${coldOverWarm} | ${cores} |`);
      });
    }
  }
  lines.push('', "velodex's event loops during the cold pull (the main thread of each of its processes, by the scheduler's schedstat): s on a core / s ready but waiting for a core / s with nothing to do (waiting on the disk, the upstream or the clients), summed over its processes.", '');
  for (const [backend, { velodex }] of Object.entries(results)) {
    velodex.forEach((v, i) => {
      const { threads, running, waiting } = v.coldMain;
      const idle = Math.max(0, (threads * v.cold) / 1000 - running - waiting);
      lines.push(`- ${backend}, ${WORKER_COUNTS[i]} worker${WORKER_COUNTS[i] === 1 ? '' : 's'} (${threads} main thread${threads === 1 ? '' : 's'}): ${running.toFixed(2)} / ${waiting.toFixed(2)} / ${idle.toFixed(2)}`);
    });
  }
  lines.push(
    '',
    `Each server first pulls ${firstRepos.length} other images, ${IMAGES} at once, unmeasured (its first-request work, for velodex the compilation of its code in each worker, is not in the cold figure).`,
    "CPU s: user + system seconds of the server's processes (velodex: its workers and their primary) for that pull (warm: the median of the runs); the issue's goal is a cold pull within 2x of a warm one's CPU. Each velodex starts on an empty store of its own.",
    's3: velodex on a prefix of a fresh MinIO\'s bucket, the proxy with the Distribution registry\'s s3 driver on another bucket of it.',
    '',
  );
  return lines.join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const work = mkdtempSync(join(tmpdir(), 'velodex-bench-pt-'));
  const logs = join(work, 'logs');
  mkdirSync(logs);
  measurePullThrough(work, logs, (msg) => process.stderr.write(`[bench] ${msg}\n`))
    .then((text) => console.log(text))
    .catch((err: unknown) => {
      console.error(`bench setup failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      process.exitCode = 1;
    })
    .finally(async () => {
      await stopAll();
      rmSync(work, { recursive: true, force: true });
    });
}
