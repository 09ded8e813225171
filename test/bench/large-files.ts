/**
 * Large downloads beside the plainest Node file server (bare-file-server.ts) serving the very
 * files velodex stored: a ~20 MiB wheel and a 16 MiB layer, at 1 and 8 connections, after a minute
 * of page traffic on velodex (a process whose heap has grown with pages collects garbage
 * differently from a fresh one, and downloads are what users run after pages). velodex runs twice:
 * one process, and two worker processes (`--workers 2`). Rounds alternate the three servers; each
 * cell is the median over the rounds. Also: CPU seconds per GiB served (all processes of a
 * server), and the peak RSS of each process of a two-worker velodex while 8 clients download a
 * 1 GiB layer at once.
 */
import { join } from 'node:path';
import { REPO } from '../support/paths.js';
import { freePort } from '../support/pypiserver.js';
import { curlDownloads, curlOnceEach } from './curl-load.js';
import { measure } from './load.js';
import { cpuTime, peakRss, processTree, type CpuTime } from './process-stats.js';
import { pushGibLayer } from './s3.js';
import { launchServer, startVelodexBench, type Server } from './servers.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

export interface LargeFile {
  label: string;
  /** The download's path on velodex (`/root/hosted/files/...`, `/v2/.../blobs/...`). */
  path: string;
  /** The same bytes as velodex stores them (the bare server's file). */
  stored: string;
  bytes: number;
}

export interface LargeFileOptions {
  dataDir: string;
  logs: string;
  files: LargeFile[];
  /** Velodex pages for the traffic before the downloads (`path` from the server's root). */
  pages: { path: string; headers?: Record<string, string> }[];
  pageTrafficSecs: number;
  duration: number;
  warmup: number;
  rounds: number;
  /** Where the 1 GiB layer goes, with the upload credentials. */
  gib: { repo: string; auth: string };
  progress: (m: string) => void;
}

const CONNECTIONS = [1, 8] as const;

interface Contender {
  label: string;
  server: Server;
  url: (file: LargeFile, index: number) => string;
}

interface Cell {
  rates: number[];
  userPerGiB: number[];
  systemPerGiB: number[];
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};

export async function measureLargeFiles(o: LargeFileOptions): Promise<string> {
  const port = await freePort();
  const bare = await launchServer({
    name: 'bare Node file server',
    cmd: process.execPath,
    args: ['--import', 'tsx', join(REPO, 'test', 'bench', 'bare-file-server.ts'), String(port), ...o.files.map((f, i) => `f${i}=${f.stored}`)],
    logFile: join(o.logs, 'bare-file-server.log'),
    url: `http://127.0.0.1:${port}`,
    ready: `http://127.0.0.1:${port}/f0`,
  });
  const one = await startVelodexBench(o.dataDir, 'warn', join(o.logs, 'velodex-large-files.log'));
  const two = await startVelodexBench(o.dataDir, 'warn', join(o.logs, 'velodex-large-files-2-workers.log'), undefined, 2);
  const contenders: Contender[] = [
    { label: 'bare Node', server: bare, url: (_f, i) => `${bare.url}/f${i}` },
    { label: 'velodex', server: one, url: (f) => `${one.url}${f.path}` },
    { label: 'velodex 2 workers', server: two, url: (f) => `${two.url}${f.path}` },
  ];
  const cells = new Map<string, Cell>();
  try {
    o.progress(`page traffic on velodex for ${o.pageTrafficSecs} s`);
    await Promise.all(
      [one, two].flatMap((s) => o.pages.map((p) => measure({ url: `${s.url}${p.path}`, headers: p.headers }, { connections: 4, duration: o.pageTrafficSecs, warmup: 0 }))),
    );
    for (let round = 0; round < o.rounds; round++) {
      for (const [i, file] of o.files.entries()) {
        for (const conns of CONNECTIONS) {
          // Each round starts with another contender, so none always runs right after the same one.
          for (let k = 0; k < contenders.length; k++) {
            const c = contenders[(k + round) % contenders.length]!;
            o.progress(`round ${round + 1}/${o.rounds}: ${file.label}, ${conns} conn: ${c.label}`);
            const url = c.url(file, i);
            if (o.warmup > 0) await curlDownloads(url, file.bytes, conns, o.warmup);
            const cpuBefore = cpuTime(c.server.pid);
            const run = await curlDownloads(url, file.bytes, conns, o.duration);
            const cpuAfter = cpuTime(c.server.pid);
            if (run.failures > 0 || run.transfers === 0) throw new Error(`${c.label}: ${run.failures} of ${run.transfers + run.failures} downloads of ${url} failed`);
            const cell = cells.get(`${i}/${conns}/${c.label}`) ?? { rates: [], userPerGiB: [], systemPerGiB: [] };
            const gib = (run.bytesPerSec * o.duration) / GiB;
            cell.rates.push(run.bytesPerSec);
            cell.userPerGiB.push((cpuAfter.user - cpuBefore.user) / gib);
            cell.systemPerGiB.push((cpuAfter.system - cpuBefore.system) / gib);
            cells.set(`${i}/${conns}/${c.label}`, cell);
          }
        }
      }
    }
  } finally {
    await Promise.all([bare.stop(), one.stop(), two.stop()]);
  }

  const rate = (i: number, conns: number, label: string) => median(cells.get(`${i}/${conns}/${label}`)?.rates ?? []) / MiB;
  const cpu = (i: number, conns: number, label: string): CpuTime => {
    const cell = cells.get(`${i}/${conns}/${label}`);
    return { user: median(cell?.userPerGiB ?? []), system: median(cell?.systemPerGiB ?? []) };
  };
  const lines = [
    `### Large downloads beside a bare Node file server (curl clients; after ${o.pageTrafficSecs} s of page traffic on velodex; median of ${o.rounds} alternating rounds)`,
    '',
    '| file | conns | bare Node MiB/s | velodex MiB/s | velodex / bare | velodex 2 workers MiB/s | 2 workers / 1 | CPU s per GiB (user + system): bare; velodex; 2 workers |',
    '|---|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const [i, file] of o.files.entries()) {
    for (const conns of CONNECTIONS) {
      const [b, v, w] = contenders.map((c) => rate(i, conns, c.label)) as [number, number, number];
      const cpus = contenders
        .map((c) => {
          const t = cpu(i, conns, c.label);
          return `${t.user.toFixed(2)} + ${t.system.toFixed(2)}`;
        })
        .join('; ');
      lines.push(`| ${file.label} | ${conns} | ${b.toFixed(0)} | ${v.toFixed(0)} | ${(v / b).toFixed(2)}x | ${w.toFixed(0)} | ${(w / v).toFixed(2)}x | ${cpus} |`);
    }
  }
  lines.push(
    '',
    'CPU s per GiB: user and system time of every process of the server over a run, per GiB it served (lower is better). System time is',
    "mostly the kernel copying bytes from the page cache and into the sockets, the same for every server that reads and writes them; user time",
    "is the server's own work. The curl clients run on the same cores.",
    '',
  );
  lines.push(await gibDownloadRss(o));
  return lines.join('\n');
}

/** A fresh two-worker velodex; 8 clients download the 1 GiB layer at once; the peak RSS of each of its processes. */
async function gibDownloadRss(o: LargeFileOptions): Promise<string> {
  const pusher = await startVelodexBench(o.dataDir, 'warn', join(o.logs, 'velodex-gib-push.log'));
  let digest: string;
  try {
    o.progress('pushing a 1 GiB layer to velodex');
    digest = await pushGibLayer('velodex', pusher, o.gib.repo, o.gib.auth);
  } finally {
    await pusher.stop();
  }
  const server = await startVelodexBench(o.dataDir, 'warn', join(o.logs, 'velodex-gib-download.log'), undefined, 2);
  try {
    o.progress('8 clients download the 1 GiB layer from velodex at once');
    const failures = await curlOnceEach(`${server.url}/v2/${o.gib.repo}/blobs/${digest}`, GiB, 8);
    if (failures > 0) throw new Error(`${failures} of 8 downloads of the 1 GiB layer failed`);
    const mib = (n: number) => `${(n / MiB).toFixed(0)} MiB`;
    const [primary, ...workers] = processTree(server.pid);
    return [
      '### peak RSS while 8 clients download a 1 GiB layer at once (VmHWM of each process of a fresh two-worker velodex)',
      '',
      `velodex workers: ${workers.map((p) => mib(peakRss(p))).join(', ')}; primary (serves nothing): ${mib(peakRss(primary!))}`,
      '',
    ].join('\n');
  } finally {
    await server.stop();
  }
}
