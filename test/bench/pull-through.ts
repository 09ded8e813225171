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
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { oci } from '../support/config.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { distributionMissing, distributionVersion, startDistribution, startVelodexBench, stopAll, type Server } from './servers.js';

const IMAGES = 6;
const WARM_RUNS = 3;
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

/** Runs the section and returns its Markdown. */
export async function measurePullThrough(work: string, logs: string, progress: (msg: string) => void): Promise<string> {
  const missing = distributionMissing();
  if (missing) return `### OCI pull-through\n\nNot measured: ${missing}. Its upstream is a Distribution registry.\n`;
  mkdirSync(join(work, 'pulls'), { recursive: true });
  const upstream = await startDistribution(join(work, 'pt-upstream'), join(work, 'pt-upstream.yml'), join(logs, 'pt-upstream.log'), undefined, 'upstream');
  const repos: string[] = [];
  let bytes = 0;
  for (let i = 0; i < IMAGES; i++) {
    const image = buildImage({ seed: `bench-pull-${i}`, layers: 4, bigFileSize: 4 * MiB });
    bytes += [image.config, ...image.layers].reduce((n, b) => n + b.bytes.length, 0);
    const layout = writeLayout(join(work, `pt-layout-${i}`), [{ tag: 'v1', item: image }]);
    const repo = `bench/image-${i}`;
    progress(`pushing ${repo} to the upstream`);
    await crane(work, ['push', layout, `${new URL(upstream.url).host}/${repo}:v1`]);
    repos.push(repo);
  }

  const proxy = await startDistribution(join(work, 'pt-proxy'), join(work, 'pt-proxy.yml'), join(logs, 'pt-proxy.log'), undefined, 'distribution proxy', [
    'proxy:',
    `  remoteurl: ${upstream.url}`,
  ]);
  const dataDir = join(work, 'pt-velodex');
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, 'upload-token'), 'bench-token\n');
  const velodex = await startVelodexBench(dataDir, 'warn', join(logs, 'pt-velodex.log'), [oci.cached('hub', upstream.url, { route: 'hub' })]);

  const results: Array<{ name: string; cold: number; warm: number }> = [];
  for (const [name, server, prefix] of [
    ['velodex (cached index)', velodex, `${new URL(velodex.url).host}/hub`],
    ['Distribution proxy', proxy, new URL(proxy.url).host],
  ] as Array<[string, Server, string]>) {
    progress(`${name}: cold pull of ${IMAGES} images`);
    const cold = await pullAll(work, prefix, repos, `${server.name}-cold`);
    const warm: number[] = [];
    for (let r = 0; r < WARM_RUNS; r++) {
      progress(`${name}: warm pull ${r + 1}/${WARM_RUNS}`);
      warm.push(await pullAll(work, prefix, repos, `${server.name}-warm-${r}`));
    }
    results.push({ name, cold, warm: median(warm) });
  }
  await Promise.all([velodex.stop(), proxy.stop(), upstream.stop()]);

  const [v, d] = results;
  const s = (ms: number) => (ms / 1000).toFixed(2);
  const lines = [
    `### OCI pull-through: ${IMAGES} images (${(bytes / MiB).toFixed(1)} MiB of blobs), pulled at once with crane; Distribution registry ${distributionVersion()} as upstream and as proxy`,
    '',
    '| pull | velodex s | Distribution proxy s | proxy / velodex |',
    '|---|--:|--:|--:|',
    `| cold (empty cache) | ${s(v!.cold)} | ${s(d!.cold)} | ${(d!.cold / v!.cold).toFixed(2)}x |`,
    `| warm (median of ${WARM_RUNS}) | ${s(v!.warm)} | ${s(d!.warm)} | ${(d!.warm / v!.warm).toFixed(2)}x |`,
    '',
  ];
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
