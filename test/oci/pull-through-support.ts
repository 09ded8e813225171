/**
 * The frame of the pull-through suites: a real distribution registry with token auth (its own
 * token realm on `localhost`), a fault proxy between it and velodex to count and break upstream
 * requests, and velodex with a cached OCI index in front of the proxy. The upstream is seeded
 * with crane, logged in as a user of the token realm; velodex pulls with its own configured
 * upstream credentials (a `_file` secret).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { oci, toml, type ConfigPart } from '../support/config.js';
import { startDistribution, type Distribution } from '../support/distribution.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { allBlobs, writeLayout, type Image, type ImageIndex } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { startTokenServer, type TokenServer } from '../support/token-server.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

export const SEED_USER = 'seeder';
export const SEED_PASSWORD = 'seed-password';
export const MIRROR_USER = 'mirror';
export const MIRROR_PASSWORD = 'mirror-password';
/** The cached index's route: images are `<velodex>/cache/<upstream repository>`. */
export const CACHE = 'cache';

export interface PullThrough {
  tokens: TokenServer;
  upstream: Distribution;
  proxy: FaultProxy;
  server: Velodex;
  /** `127.0.0.1:<port>` of velodex. */
  host: string;
  work: string;
  /** HOME and DOCKER_CONFIG of the clients (logged in to the upstream for seeding). */
  env: Record<string, string>;
}

export interface PullThroughOptions {
  /** The cached index's `cache_ttl_secs` (default 0: every tag read revalidates). */
  ttlSecs?: number;
  /** Extra indexes (a hosted and a virtual index), given the upstream's address. */
  extraIndexes?: (upstream: string) => ConfigPart[];
}

export function pullThroughSuite(name: string, opts: PullThroughOptions = {}): PullThrough {
  const s = {} as PullThrough;
  beforeAll(async () => {
    s.work = tempDir(`velodex-${name}-`);
    s.env = { HOME: s.work, DOCKER_CONFIG: join(s.work, 'docker') };
    s.tokens = await startTokenServer({ dir: s.work, users: { [SEED_USER]: SEED_PASSWORD, [MIRROR_USER]: MIRROR_PASSWORD } });
    s.upstream = await startDistribution(s.work, s.tokens);
    s.proxy = await FaultProxy.start(s.upstream.url);
    const passwordFile = join(s.work, 'upstream-password');
    writeFileSync(passwordFile, `${MIRROR_PASSWORD}\n`);
    s.server = await startVelodex({
      config: toml(
        oci.cached('cache', s.proxy.url, {
          route: CACHE,
          ttlSecs: opts.ttlSecs ?? 0,
          credentials: { username: MIRROR_USER, password: { file: passwordFile } },
          // The upstream's token realm is on `localhost`, another name than the upstream's address.
          upstreamHosts: ['localhost'],
        }),
        ...(opts.extraIndexes?.(s.proxy.url) ?? []),
      ),
    });
    s.host = `127.0.0.1:${s.server.port}`;
    await crane(s, ['auth', 'login', s.upstream.host, '-u', SEED_USER, '--password-stdin'], SEED_PASSWORD);
  }, 120_000);
  afterAll(async () => {
    await s.server?.stop();
    await s.proxy?.close();
    await s.upstream?.stop();
    await s.tokens?.close();
  });
  return s;
}

export function crane(s: PullThrough, args: string[], input?: string, allowFailure = false): Promise<RunResult> {
  return run(tool('crane'), [...args, '--insecure'], { env: s.env, input, allowFailure, timeoutMs: 180_000 });
}

/** Pushes `item` to the upstream (not through velodex) as `<repo>:<tag>`. */
export async function seed(s: PullThrough, repo: string, tag: string, item: Image | ImageIndex): Promise<void> {
  const layout = writeLayout(join(s.work, `seed-${repo.replaceAll('/', '_')}-${tag}`), [{ tag, item }]);
  await crane(s, ['push', layout, `${s.upstream.host}/${repo}:${tag}`]);
}

/** Upstream requests seen since `from` (an index into `proxy.requests`), as `METHOD path`. */
export function since(s: PullThrough, from: number): string[] {
  return s.proxy.requests.slice(from);
}

/** How many of `requests` are `METHOD path`. */
export function countOf(requests: readonly string[], method: string, path: string): number {
  return requests.filter((r) => r === `${method} ${path}`).length;
}

/** The upstream paths of every blob and manifest of `item` in `repo`. */
export function blobPaths(repo: string, item: Image | ImageIndex): string[] {
  return allBlobs(item).map((b) => `/v2/${repo}/blobs/${b.descriptor.digest}`);
}

export interface CacheStats {
  pages: number;
  downloads: number;
  refreshes: number;
  changed: number;
  stale_served: number;
  upstream_errors: number;
  rejected: number;
}

/** The cached index's counters from `/+stats`. */
export async function cacheStats(s: PullThrough): Promise<CacheStats> {
  const res = await fetch(`${s.server.url}/+stats?index=${CACHE}`);
  const doc = (await res.json()) as Record<string, unknown>;
  const totals = (doc.totals ?? doc) as CacheStats;
  return totals;
}
