/**
 * Warm reads with the store on a RAM disk (tmpfs) as well as on disk: a manifest GET by tag and a
 * cached Simple page (velodex's cached index in front of pypiserver, within its cache TTL), beside
 * the Distribution registry's manifest GET on the same two places. On a RAM disk no disk sync
 * hides what a request costs in file system calls; the calls per warm request are counted with
 * `strace -c` on the running server (every thread), over a fixed number of requests.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { cached } from '../support/config.js';
import { measure, type Load, type Target } from './load.js';
import { startVelodexBench, type Server } from './servers.js';

export interface WarmReadOptions {
  work: string;
  logs: string;
  token: string;
  /** The cached index's upstream (pypiserver's /simple/) and a project it serves. */
  upstreamSimple: string;
  project: string;
  /** Pushes the bench image to `name` on `server`; the manifest-by-tag target. */
  pushImage: (label: string, server: Server, name: string) => Promise<Target>;
  /** Starts a Distribution registry storing under `rootDir`, when the peer is installed. */
  distribution?: (rootDir: string, label: string) => Promise<Server>;
  load: Load;
  progress: (m: string) => void;
}

/** The calls that touch the file system: by path (open, stat, rename...), and on open files. */
const FS_SYSCALLS = '%file,fstat,pread64,pwrite64,fsync,fdatasync,getdents64';
const COUNTED_REQUESTS = 2000;

interface PlaceResult {
  place: string;
  manifest: number;
  manifestCalls: string;
  page: number;
  pageCalls: string;
  distribution?: number;
}

export async function measureWarmReads(o: WarmReadOptions): Promise<string> {
  const ram = mkdtempSync('/dev/shm/velodex-bench-');
  const results: PlaceResult[] = [];
  try {
    for (const [place, root] of [
      ['disk', join(o.work, 'warm-reads')],
      ['RAM disk (tmpfs)', ram],
    ] as const) {
      results.push(await measurePlace(o, place, root));
    }
  } finally {
    rmSync(ram, { recursive: true, force: true });
  }
  const fmt = (n: number | undefined) => (n === undefined ? 'n/a' : Math.round(n).toLocaleString('en-US'));
  return [
    `### Warm reads, store on disk and on a RAM disk (req/s, ${o.load.connections} connections; fs calls per request from strace -c over ${COUNTED_REQUESTS} requests)`,
    '',
    '| store on | manifest GET by tag | its fs calls per request | Distribution manifest GET | velodex / Distribution | cached Simple page | its fs calls per request |',
    '|---|--:|---|--:|--:|--:|---|',
    ...results.map(
      (r) =>
        `| ${r.place} | ${fmt(r.manifest)} | ${r.manifestCalls} | ${fmt(r.distribution)} | ${r.distribution ? `${(r.manifest / r.distribution).toFixed(2)}x` : 'n/a'} | ${fmt(r.page)} | ${r.pageCalls} |`,
    ),
    '',
  ].join('\n');
}

async function measurePlace(o: WarmReadOptions, place: string, root: string): Promise<PlaceResult> {
  const dataDir = join(root, 'velodex');
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, 'upload-token'), `${o.token}\n`);
  const velodex = await startVelodexBench(
    dataDir,
    'warn',
    join(o.logs, `velodex-warm-${place.split(' ')[0]}.log`),
    [cached('pypi', o.upstreamSimple)],
  );
  try {
    const manifest = await o.pushImage(`velodex (${place})`, velodex, 'root/oci/bench/app');
    const page: Target = { url: `${velodex.url}/root/pypi/simple/${o.project}/`, headers: { accept: 'text/html' } };
    const first = await fetch(page.url, { headers: page.headers });
    await first.arrayBuffer();
    if (first.status !== 200) throw new Error(`cached page ${page.url} answered ${first.status}`);
    o.progress(`warm reads on ${place}: velodex manifest`);
    const m = await measure(manifest, o.load);
    o.progress(`warm reads on ${place}: velodex cached page`);
    const p = await measure(page, o.load);
    const manifestCalls = await fsCallsPerRequest(velodex.pid, manifest);
    const pageCalls = await fsCallsPerRequest(velodex.pid, page);
    let distribution: number | undefined;
    if (o.distribution) {
      const registry = await o.distribution(join(root, 'distribution'), `distribution (${place})`);
      try {
        const target = await o.pushImage(`distribution (${place})`, registry, 'bench/app');
        o.progress(`warm reads on ${place}: distribution manifest`);
        distribution = (await measure(target, o.load)).reqPerSec;
      } finally {
        await registry.stop();
      }
    }
    return { place, manifest: m.reqPerSec, manifestCalls, page: p.reqPerSec, pageCalls, distribution };
  } finally {
    await velodex.stop();
  }
}

/** `strace -c` on every thread of `pid` while exactly COUNTED_REQUESTS warm requests run: "1.00 (statx 1.00)". */
async function fsCallsPerRequest(pid: number, target: Target): Promise<string> {
  const out: string[] = [];
  const strace = spawn('strace', ['-c', '-f', '-e', `trace=${FS_SYSCALLS}`, '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  strace.stderr.on('data', (c: Buffer) => out.push(c.toString()));
  const exited = new Promise<number | null>((resolve, reject) => {
    strace.once('error', reject);
    strace.once('exit', (code) => resolve(code));
  });
  // strace reports each thread it attached; requests wait until it is on all of them.
  const deadline = Date.now() + 10_000;
  while (!/attached/.test(out.join('')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 300));
  const r = await autocannon({ url: target.url, headers: target.headers ?? {}, connections: 4, amount: COUNTED_REQUESTS });
  strace.kill('SIGINT');
  await exited;
  if (r['2xx'] !== COUNTED_REQUESTS) throw new Error(`strace count: ${r['2xx']} of ${COUNTED_REQUESTS} requests to ${target.url} answered 2xx`);
  const calls = new Map<string, number>();
  for (const line of out.join('').split('\n')) {
    // "% time     seconds  usecs/call     calls    errors syscall": calls is the 4th column, the name the last.
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?([a-z_0-9]+)\s*$/.exec(line);
    if (m?.[1] && m[2] && m[2] !== 'total') calls.set(m[2], Number(m[1]));
  }
  const per = (n: number) => (n / COUNTED_REQUESTS).toFixed(2);
  const total = [...calls.values()].reduce((a, b) => a + b, 0);
  const parts = [...calls.entries()].filter(([, n]) => n / COUNTED_REQUESTS >= 0.01).map(([name, n]) => `${name} ${per(n)}`);
  return `${per(total)}${parts.length ? ` (${parts.join(', ')})` : ''}`;
}
