/**
 * The s3 section of `make bench`: velodex on a real MinIO beside velodex on the filesystem (the
 * same data, pushed and uploaded the same way) and beside the Distribution registry on the same
 * MinIO through its own s3 storage driver (redirects off, so it serves the bytes itself as
 * velodex does). Then the peak resident memory of each server while a 1 GiB layer is pushed and
 * pulled through it: the s3 backend streams, so velodex's RSS must stay far below the layer.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { hosted, oci, s3Storage, toml } from '../support/config.js';
import { costOf, startCountedApp, stopCountedApp } from '../support/counted-app.js';
import { startMinio, type Minio } from '../support/minio.js';
import { measure, measureDownload, type Load, type Target } from './load.js';
import { startDistribution, startVelodexBench, type Server } from './servers.js';
import { busyCores, costed, cpuTime, machineTicks, peakRss, processTree, type CpuTime } from './process-stats.js';
import { wrk } from './wrk-load.js';

const MiB = 1024 * 1024;
const CORES = cpus().length;
const GiB = 1024 * MiB;

export interface S3Scenario {
  name: string;
  load: Load;
  /** The scenario on velodex over fs, and the path (below the server's URL) on every server. */
  fs: Target;
  /** The same on the Distribution registry (OCI only), as a path below its URL. */
  distribution?: Target;
  byThroughput?: boolean;
}

export interface S3Bench {
  minio: Minio;
  velodex: Server;
  /** A second velodex on the same prefix (the same data) with `[storage] read_cache_ms`. */
  readCached: Server;
  /**
   * A third with `[storage] peer_cache`. The data is written through `velodex` (without the
   * setting) before this one reads any of it, so it holds no copy a write could have missed.
   */
  peerCached: Server;
  readCacheMs: number;
  workers: number;
  distribution?: Server;
  /** Starts another velodex process on the same prefix, one worker (a replica): default settings, or `peer_cache`. */
  replica(name: string, peerCache?: boolean): Promise<Server>;
  stop(): Promise<void>;
}

export interface S3BenchOptions {
  /** Worker processes of each velodex (its default on this machine is one per core). */
  workers: number;
  readCacheMs: number;
}

/**
 * MinIO, velodex on one prefix of its bucket (twice: with the default reads, and with
 * `read_cache_ms`, one store), and the Distribution registry on another bucket.
 */
export async function startS3Servers(work: string, logs: string, token: string, withDistribution: boolean, o: S3BenchOptions, progress: (m: string) => void): Promise<S3Bench> {
  progress('starting MinIO, velodex on s3 (default reads, read_cache_ms, peer_cache) and the Distribution registry on s3');
  const minio = await startMinio();
  const started: Server[] = [];
  // Each process its own data dir (scratch files), all on one prefix; the fs velodex's upload
  // token, so one twine and crane login serve every one.
  const onPrefix = async (name: string, workers: number, reads: { readCacheMs?: number; peerCache?: boolean } = {}) => {
    const data = join(work, `velodex-s3-${name}`);
    mkdirSync(data);
    writeFileSync(join(data, 'upload-token'), `${token}\n`, { mode: 0o600 });
    const server = await startVelodexBench(data, 'warn', join(logs, `velodex-s3-${name}.log`), [s3Storage(minio, { prefix: 'velodex', ...reads })], workers);
    started.push(server);
    return server;
  };
  const velodex = await onPrefix('default', o.workers);
  const readCached = await onPrefix('read-cache', o.workers, { readCacheMs: o.readCacheMs });
  const peerCached = await onPrefix('peer-cache', o.workers, { peerCache: true });
  let distribution: Server | undefined;
  if (withDistribution) {
    const bucket = await minio.makeBucket('distribution');
    distribution = await startDistributionS3(minio, bucket, join(work, 'distribution-s3.yml'), join(logs, 'distribution-s3.log'));
  }
  return {
    minio,
    velodex,
    readCached,
    peerCached,
    readCacheMs: o.readCacheMs,
    workers: o.workers,
    distribution,
    replica: (name, peerCache) => onPrefix(name, 1, peerCache ? { peerCache } : {}),
    async stop() {
      for (const server of started) await server.stop();
      await distribution?.stop();
      await minio.stop();
    },
  };
}

/** The Distribution registry's s3 driver on MinIO: path-style, no TLS, redirects off. */
function startDistributionS3(minio: Minio, bucket: string, configFile: string, logFile: string): Promise<Server> {
  return startDistribution('', configFile, logFile, distributionS3Driver(minio, bucket), 'distribution (s3)');
}

/** The lines of the Distribution registry's s3 storage driver for `bucket` of `minio` (under `storage:`). */
export function distributionS3Driver(minio: Minio, bucket: string): string[] {
  return [
    '  s3:',
    `    accesskey: ${JSON.stringify(minio.accessKey)}`,
    `    secretkey: ${JSON.stringify(minio.secretKey)}`,
    '    region: us-east-1',
    `    regionendpoint: ${minio.endpoint}`,
    `    bucket: ${bucket}`,
    '    secure: false',
    '    forcepathstyle: true',
    '  redirect:',
    '    disable: true',
  ];
}

const rebase = (t: Target, base: string): Target => ({ ...t, url: t.url.replace(/^http:\/\/[^/]+/, base) });

/** One scenario on one server: its rate, and the CPU it and the store (MinIO) spent per unit of work. */
interface Costed {
  rate: number;
  /** CPU ms per request, or CPU s per GiB for a download. */
  serverCpu: number;
  storeCpu: number | undefined;
  cores: number;
}

/**
 * Measures `target` after its warm-up, with the CPU time of the server's processes and of MinIO
 * read around the measured window only: on a machine whose cores the load, the server and the
 * store share, CPU per request says what each costs even when the rates move with the load.
 */
async function costedRun(s: S3Scenario, target: Target, server: Server, minio: Minio | undefined): Promise<Costed> {
  const how = s.byThroughput ? measureDownload : measure;
  if (s.load.warmup > 0) await how(target, { ...s.load, duration: s.load.warmup, warmup: 0 });
  const storePid = minio?.pid();
  const storeBefore = storePid === undefined ? undefined : cpuTime(storePid);
  const { result, cpu, machineCores } = await costed(server.pid, CORES, () => how(target, { ...s.load, warmup: 0 }));
  const storeAfter = storePid === undefined ? undefined : cpuTime(storePid);
  const seconds = (c: CpuTime) => c.user + c.system;
  // Per request in ms, or per GiB received in s.
  const work = s.byThroughput ? (result.bytesPerSec * s.load.duration) / GiB : result.requests / 1000;
  return {
    rate: s.byThroughput ? result.bytesPerSec / MiB : result.reqPerSec,
    serverCpu: seconds(cpu) / work,
    storeCpu: storeBefore && storeAfter ? (seconds(storeAfter) - seconds(storeBefore)) / work : undefined,
    cores: machineCores,
  };
}

/** Measures each scenario on velodex fs, velodex s3 (three ways) and (OCI) the Distribution registry on s3. */
export async function measureS3(servers: S3Bench, fs: Server, scenarios: S3Scenario[], progress: (m: string) => void): Promise<string> {
  const cache = `read_cache_ms ${servers.readCacheMs}`;
  const lines = [
    `### s3 backend: velodex on MinIO vs velodex on fs, and vs the Distribution registry on the same MinIO (velodex: ${servers.workers} worker processes each)`,
    '',
    `| scenario | velodex fs | velodex s3 | velodex s3, peer_cache | velodex s3, ${cache} | distribution s3 | velodex s3 / distribution s3 | peer_cache / distribution s3 | peer_cache / fs | ${cache}: / fs |`,
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  const costs = [
    `### what each request cost in CPU (the rows above): the server's processes, and MinIO for it; ms per request, or s per GiB for a download`,
    '',
    `| scenario | velodex fs | velodex s3 + MinIO | velodex s3, peer_cache + MinIO | velodex s3, ${cache} + MinIO | distribution s3 + MinIO | velodex s3 / distribution s3, server + MinIO | peer_cache / distribution s3, server + MinIO | cores busy (machine): fs; s3; peer_cache; ${cache}; distribution |`,
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const s of scenarios) {
    const unit = s.byThroughput ? ' MiB/s' : ' req/s';
    progress(`${s.name}: velodex fs`);
    const onFs = await costedRun(s, rebase(s.fs, fs.url), fs, undefined);
    progress(`${s.name}: velodex s3`);
    const s3 = await costedRun(s, rebase(s.fs, servers.velodex.url), servers.velodex, servers.minio);
    progress(`${s.name}: velodex s3, peer_cache`);
    const peer = await costedRun(s, rebase(s.fs, servers.peerCached.url), servers.peerCached, servers.minio);
    progress(`${s.name}: velodex s3, ${cache}`);
    const cached = await costedRun(s, rebase(s.fs, servers.readCached.url), servers.readCached, servers.minio);
    let dist: Costed | undefined;
    if (s.distribution && servers.distribution) {
      progress(`${s.name}: distribution s3`);
      dist = await costedRun(s, rebase(s.distribution, servers.distribution.url), servers.distribution, servers.minio);
    }
    const fmt = (c: Costed | undefined) => (c === undefined ? 'n/a' : `${Math.round(c.rate).toLocaleString('en-US')}${unit}`);
    const ratio = (a: number, b: number | undefined) => (b === undefined ? 'n/a' : `${(a / b).toFixed(2)}x`);
    lines.push(
      `| ${s.name} | ${fmt(onFs)} | ${fmt(s3)} | ${fmt(peer)} | ${fmt(cached)} | ${fmt(dist)} | ${ratio(s3.rate, dist?.rate)} | ${ratio(peer.rate, dist?.rate)} | ${ratio(peer.rate, onFs.rate)} | ${ratio(cached.rate, onFs.rate)} |`,
    );
    const cpu = (n: number) => n.toFixed(s.byThroughput ? 2 : 3);
    const withStore = (c: Costed | undefined) => (c === undefined ? 'n/a' : `${cpu(c.serverCpu)} + ${c.storeCpu === undefined ? '?' : cpu(c.storeCpu)}`);
    const total = (c: Costed | undefined) => (c === undefined ? undefined : c.serverCpu + (c.storeCpu ?? 0));
    const busy = [onFs, s3, peer, cached, dist].map((c) => (c === undefined ? 'n/a' : c.cores.toFixed(1))).join('; ');
    // Below 1: velodex spent less CPU (with MinIO's for it) than Distribution for the same request.
    costs.push(
      `| ${s.name} | ${cpu(onFs.serverCpu)} | ${withStore(s3)} | ${withStore(peer)} | ${withStore(cached)} | ${withStore(dist)} | ${ratio(total(s3)!, total(dist))} | ${ratio(total(peer)!, total(dist))} | ${busy} of ${CORES} |`,
    );
  }
  lines.push(
    '',
    'peer_cache: every process keeps what its requests read and every write drops the other processes\' copies before it is acknowledged (docs/storage.md); a write acknowledged anywhere is served everywhere on the next request, as with the default reads.',
    '',
    ...costs,
    '',
    'CPU ratios: below 1, velodex (with MinIO for it) spent less CPU than the Distribution registry (with MinIO for it) for the same request; read around the measured window only (after the warm-up).',
    '',
  );
  return lines.join('\n');
}

/** 1 GiB of bytes that do not compress (a 1 MiB random block, each copy stamped with its index). */
function gibStream(): Readable {
  const block = createHash('sha512').update('velodex-bench-gib').digest();
  const chunk = Buffer.alloc(MiB);
  for (let i = 0; i < MiB; i += block.length) block.copy(chunk, i);
  let sent = 0;
  return new Readable({
    read() {
      if (sent === 1024) return this.push(null);
      const copy = Buffer.from(chunk);
      copy.writeUInt32BE(sent, 0);
      sent++;
      this.push(copy);
    },
  });
}

async function gibDigest(): Promise<string> {
  const hash = createHash('sha256');
  for await (const c of gibStream()) hash.update(c as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

/** Pushes the 1 GiB blob (monolithic POST + PUT, streamed from this process) to `repo`; returns its digest. */
export async function pushGibLayer(label: string, server: Server, repo: string, auth?: string): Promise<string> {
  const digest = await gibDigest();
  const headers: Record<string, string> = auth ? { authorization: auth } : {};
  const start = await fetch(`${server.url}/v2/${repo}/blobs/uploads/`, { method: 'POST', headers });
  await start.arrayBuffer();
  const location = start.headers.get('location');
  if (start.status !== 202 || !location) throw new Error(`${label}: upload POST answered ${start.status}`);
  const put = new URL(location, server.url);
  put.searchParams.set('digest', digest);
  const res = await fetch(put, {
    method: 'PUT',
    headers: { ...headers, 'content-type': 'application/octet-stream', 'content-length': String(GiB) },
    body: Readable.toWeb(gibStream()) as ReadableStream,
    duplex: 'half',
  } as RequestInit);
  const text = await res.text();
  if (res.status !== 201) throw new Error(`${label}: upload PUT answered ${res.status}: ${text.slice(0, 300)}`);
  return digest;
}

/**
 * Pushes a 1 GiB blob to `repo` on each server, pulls it back whole (checking its digest), and
 * reports each server's peak RSS before and after.
 */
export async function gibLayerRss(servers: { label: string; server: Server; repo: string; auth?: string }[], progress: (m: string) => void): Promise<string> {
  const lines = ['### peak RSS while a 1 GiB layer is pushed and pulled (VmHWM of the server process; with workers, of the largest of them)', '', '| server | before | after push + pull |', '|---|--:|--:|'];
  for (const { label, server, repo, auth } of servers) {
    const before = peakOfTree(server.pid);
    progress(`1 GiB layer through ${label}`);
    const digest = await pushGibLayer(label, server, repo, auth);
    const got = await fetch(`${server.url}/v2/${repo}/blobs/${digest}`, { headers: auth ? { authorization: auth } : {} });
    if (!got.ok || !got.body) throw new Error(`${label}: blob GET answered ${got.status}`);
    const hash = createHash('sha256');
    for await (const c of got.body) hash.update(c);
    if (`sha256:${hash.digest('hex')}` !== digest) throw new Error(`${label}: the 1 GiB blob came back with another digest`);
    const mib = (n: number) => `${(n / MiB).toFixed(0)} MiB`;
    lines.push(`| ${label} | ${mib(before)} | ${mib(peakOfTree(server.pid))} |`);
  }
  lines.push('');
  return lines.join('\n');
}

/** The largest peak RSS among a server's processes (with workers: the primary and each worker). */
function peakOfTree(pid: number): number {
  return Math.max(...processTree(pid).map(peakRss));
}

export interface ReplicaTarget {
  name: string;
  /** The request, on any of the servers (its host is replaced). */
  target: Target;
}

/**
 * Three velodex processes (one worker each) on one MinIO prefix against one of them: the same warm
 * requests, wrk with 9 connections to one, or 3 to each of the three at once. On a machine with
 * the cores, three processes serve about three times one; on this two-core machine, which also
 * runs MinIO and wrk, the cores run out first: the row says how many were busy.
 */
export async function measureReplicas(servers: S3Bench, targets: ReplicaTarget[], load: { duration: number; warmup: number }, progress: (m: string) => void): Promise<string> {
  const lines = [
    '### many replicas: three velodex processes on one MinIO prefix against one (wrk, 9 connections in all; one worker each; default reads, then peer_cache)',
    '',
    '| request | reads | one process req/s | three processes req/s | three / one | cores busy (machine): one; three |',
    '|---|---|--:|--:|--:|--:|',
  ];
  for (const peerCache of [false, true]) {
    const kind = peerCache ? 'peer_cache' : 'default';
    const replicas = [await servers.replica(`${kind}-1`, peerCache), await servers.replica(`${kind}-2`, peerCache), await servers.replica(`${kind}-3`, peerCache)];
    try {
      lines.push(...(await replicaRows(kind, replicas, targets, load, progress)));
    } finally {
      for (const r of replicas) await r.stop();
    }
  }
  lines.push('');
  return lines.join('\n');
}

/** The rows of one kind of replicas: every target on one, then on all three at once. */
async function replicaRows(kind: string, replicas: Server[], targets: ReplicaTarget[], load: { duration: number; warmup: number }, progress: (m: string) => void): Promise<string[]> {
  const lines: string[] = [];
  for (const { name, target } of targets) {
    const on = (server: Server) => rebase(target, server.url).url;
    const headers = target.headers ?? {};
    progress(`${name} (${kind}): one replica, then three`);
    const [first] = replicas;
    if (!first) throw new Error('no replica started');
    if (load.warmup > 0) await Promise.all(replicas.map((r) => wrk(on(r), headers, 3, load.warmup)));
    const machineOne = machineTicks();
    const one = await wrk(on(first), headers, 9, load.duration);
    const coresOne = busyCores(machineOne, machineTicks(), CORES);
    const machineThree = machineTicks();
    const three = await Promise.all(replicas.map((r) => wrk(on(r), headers, 3, load.duration)));
    const coresThree = busyCores(machineThree, machineTicks(), CORES);
    const total = three.reduce((sum, r) => sum + r.reqPerSec, 0);
    const failed = one.failures + three.reduce((sum, r) => sum + r.failures, 0);
    if (failed > 0) throw new Error(`${name}: ${failed} failed responses through the replicas`);
    const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
    lines.push(`| ${name} | ${kind} | ${fmt(one.reqPerSec)} | ${fmt(total)} | ${(total / one.reqPerSec).toFixed(2)}x | ${coresOne.toFixed(2)}; ${coresThree.toFixed(2)} of ${CORES} |`);
  }
  return lines;
}

/**
 * What a warm request costs the store (storage/counted.ts, as the warm-reads suites count it): an
 * app in this process over the same prefix, with the default reads and with `read_cache_ms`,
 * each request made three times and the third counted. Requests: every store call; round trips: the
 * calls made one after another.
 */
export async function storeCallsPerRequest(servers: S3Bench, work: string, targets: ReplicaTarget[]): Promise<string> {
  const dir = join(work, 'counted-s3');
  mkdirSync(dir);
  const storage = toml(s3Storage(servers.minio, { prefix: 'velodex' }));
  writeFileSync(join(dir, 'velodex.toml'), storage);
  const tokenFile = join(dir, 'upload-token');
  writeFileSync(tokenFile, 'unused\n', { mode: 0o600 });
  const config = toml(s3Storage(servers.minio, { prefix: 'velodex' }), hosted('hosted', { token: { file: tokenFile } }), oci.hosted('oci', { token: { file: tokenFile } }));
  const lines = [
    '### store calls per warm request on s3 (storage/counted.ts: requests to MinIO, and round trips one after another)',
    '',
    `| request | default reads | read_cache_ms ${servers.readCacheMs} |`,
    '|---|--:|--:|',
  ];
  const apps = [await startCountedApp(dir, 'default', config), await startCountedApp(dir, 'read-cache', config, servers.readCacheMs)];
  try {
    for (const { name, target } of targets) {
      const cells: string[] = [];
      for (const app of apps) {
        const request = () => fetch(rebase(target, app.url).url, { headers: target.headers ?? {} });
        // Warm: what a first read learns (a blob's size, a small blob's bytes) a later one uses.
        for (let i = 0; i < 2; i++) await costOf(app, request);
        const cost = await costOf(app, request);
        const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
        cells.push(`${plural(cost.total, 'request')}, ${plural(cost.rounds, 'round trip')}`);
      }
      lines.push(`| ${name} | ${cells.join(' | ')} |`);
    }
  } finally {
    for (const app of apps) await stopCountedApp(app);
  }
  lines.push('');
  return lines.join('\n');
}
