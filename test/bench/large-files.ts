/**
 * Large downloads beside the plainest Node file server (bare-file-server.ts) serving the very
 * files velodex stored: a ~20 MiB wheel and a 16 MiB layer, at 1 and 8 connections, after a minute
 * of page traffic on velodex (a process whose heap has grown with pages collects garbage
 * differently from a fresh one, and downloads are what users run after pages), with two kinds of
 * client (download-clients.ts: curl, and a client that has the kernel drop the bytes). velodex runs twice:
 * one process, and two worker processes (`--workers 2`). Rounds alternate the three servers; each
 * cell is the median over the rounds. Also: CPU seconds per GiB served (all processes of a
 * server), the cores the server and the whole machine kept busy, the requests per second of one
 * and two workers on warm pages, manifests and small blobs (wrk), and the peak RSS of each process
 * of a two-worker velodex while 8 clients download a 1 GiB layer at once.
 */
import { join } from 'node:path';
import { REPO } from '../support/paths.js';
import { freePort } from '../support/pypiserver.js';
import { cpus } from 'node:os';
import { downloadLoop, curlOnceEach, type DownloadClient } from './download-clients.js';
import { measure } from './load.js';
import { costed, peakRss, processTree, type CpuTime } from './process-stats.js';
import { wrk } from './wrk-load.js';
import { pushGibLayer } from './s3.js';
import { launchServer, startVelodexBench, type Server } from './servers.js';
import { MALLOC_TUNABLES } from '../../registry/src/workers/allocator-env.js';

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
  /** Warm requests that one and two workers answer, driven by wrk (`path` from the server's root). */
  requests: { label: string; path: string; headers?: Record<string, string> }[];
  pageTrafficSecs: number;
  duration: number;
  warmup: number;
  rounds: number;
  /** Where the 1 GiB layer goes, with the upload credentials. */
  gib: { repo: string; auth: string };
  progress: (m: string) => void;
}

const CONNECTIONS = [1, 8] as const;
const CLIENTS: readonly DownloadClient[] = ['curl', 'discard'];
const CORES = cpus().length;

interface Contender {
  label: string;
  server: Server;
  url: (file: LargeFile, index: number) => string;
}

interface Cell {
  rates: number[];
  userPerGiB: number[];
  systemPerGiB: number[];
  /** Cores the server's processes kept busy, and the whole machine. */
  serverCores: number[];
  machineCores: number[];
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
    // The allocator setting velodex runs with (its image's), so the floor is measured alike.
    env: { GLIBC_TUNABLES: MALLOC_TUNABLES },
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
  /** The cell under `key`, created empty on first use. */
  const cellOf = (key: string): Cell => {
    const cell = cells.get(key) ?? { rates: [], userPerGiB: [], systemPerGiB: [], serverCores: [], machineCores: [] };
    cells.set(key, cell);
    return cell;
  };
  try {
    o.progress(`page traffic on velodex for ${o.pageTrafficSecs} s`);
    await Promise.all(
      [one, two].flatMap((s) => o.pages.map((p) => measure({ url: `${s.url}${p.path}`, headers: p.headers }, { connections: 4, duration: o.pageTrafficSecs, warmup: 0 }))),
    );
    for (let round = 0; round < o.rounds; round++) {
      for (const [i, file] of o.files.entries()) {
        for (const client of CLIENTS) {
          for (const conns of CONNECTIONS) {
            // Each round starts with another contender, so none always runs right after the same one.
            for (let k = 0; k < contenders.length; k++) {
              const c = contenders[(k + round) % contenders.length]!;
              o.progress(`round ${round + 1}/${o.rounds}: ${file.label}, ${client}, ${conns} conn: ${c.label}`);
              const url = c.url(file, i);
              if (o.warmup > 0) await downloadLoop(url, file.bytes, conns, o.warmup, client);
              const { result: run, cpu, machineCores } = await costed(c.server.pid, CORES, () => downloadLoop(url, file.bytes, conns, o.duration, client));
              if (run.failures > 0 || run.transfers === 0) throw new Error(`${c.label}: ${run.failures} of ${run.transfers + run.failures} downloads of ${url} failed`);
              const cell = cellOf(`${i}/${client}/${conns}/${c.label}`);
              const gib = (run.bytesPerSec * o.duration) / GiB;
              cell.rates.push(run.bytesPerSec);
              cell.userPerGiB.push(cpu.user / gib);
              cell.systemPerGiB.push(cpu.system / gib);
              cell.serverCores.push((cpu.user + cpu.system) / o.duration);
              cell.machineCores.push(machineCores);
            }
          }
        }
      }
      for (const r of o.requests) {
        for (const c of round % 2 ? [two, one] : [one, two]) {
          o.progress(`round ${round + 1}/${o.rounds}: ${r.label}, wrk 8 conn: ${c === one ? '1 worker' : '2 workers'}`);
          const url = `${c.url}${r.path}`;
          if (o.warmup > 0) await wrk(url, r.headers ?? {}, 8, o.warmup);
          const { result: run, cpu, machineCores } = await costed(c.pid, CORES, () => wrk(url, r.headers ?? {}, 8, o.duration));
          if (run.failures > 0) throw new Error(`${r.label}: ${run.failures} failed requests to ${url}`);
          const cell = cellOf(`req/${r.label}/${c === one ? 1 : 2}`);
          cell.rates.push(run.reqPerSec);
          cell.serverCores.push((cpu.user + cpu.system) / o.duration);
          cell.machineCores.push(machineCores);
        }
      }
    }
  } finally {
    await Promise.all([bare.stop(), one.stop(), two.stop()]);
  }

  const cores = (key: string) => `${median(cellOf(key).serverCores).toFixed(2)} / ${median(cellOf(key).machineCores).toFixed(2)}`;
  const lines = [
    `### Large downloads beside a bare Node file server (after ${o.pageTrafficSecs} s of page traffic on velodex; median of ${o.rounds} alternating rounds)`,
    '',
    '| file | client | conns | bare Node MiB/s | velodex MiB/s | velodex / bare | velodex 2 workers MiB/s | 2 workers / 1 | cores busy, server / machine: velodex; 2 workers | CPU s per GiB (user + system): bare; velodex; 2 workers |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const [i, file] of o.files.entries()) {
    for (const client of CLIENTS) {
      for (const conns of CONNECTIONS) {
        const key = (label: string) => `${i}/${client}/${conns}/${label}`;
        const [b, v, w] = contenders.map((c) => median(cellOf(key(c.label)).rates) / MiB) as [number, number, number];
        const cpus = contenders
          .map((c) => {
            const t: CpuTime = { user: median(cellOf(key(c.label)).userPerGiB), system: median(cellOf(key(c.label)).systemPerGiB) };
            return `${t.user.toFixed(2)} + ${t.system.toFixed(2)}`;
          })
          .join('; ');
        const busy = `${cores(key('velodex'))}; ${cores(key('velodex 2 workers'))}`;
        lines.push(`| ${file.label} | ${client} | ${conns} | ${b.toFixed(0)} | ${v.toFixed(0)} | ${(v / b).toFixed(2)}x | ${w.toFixed(0)} | ${(w / v).toFixed(2)}x | ${busy} | ${cpus} |`);
      }
    }
  }
  lines.push(
    '',
    'Clients: `curl` copies every byte out of its socket, as real clients do; `discard` (discard-client.py) has the kernel drop the bytes',
    'without copying them out, so the clients cost this machine about what clients on other machines would. CPU s per GiB: user and',
    'system time of every process of the server over a run, per GiB it served (lower is better). System time is mostly the kernel',
    "copying bytes from the page cache and into the sockets, the same for every server that reads and writes them; user time is the",
    "server's own work. Cores busy: the server's processes, and the whole machine (clients, kernel, bench) of its "
      + `${CORES} cores.`,
    '',
    `### Warm requests on every core: one velodex process and two workers (wrk, 8 connections; median of ${o.rounds} alternating rounds)`,
    '',
    '| request | 1 worker req/s | 2 workers req/s | 2 workers / 1 | cores busy, server / machine: 1 worker; 2 workers |',
    '|---|--:|--:|--:|--:|',
  );
  for (const r of o.requests) {
    const [a, b] = [1, 2].map((n) => median(cellOf(`req/${r.label}/${n}`).rates)) as [number, number];
    const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
    lines.push(`| ${r.label} | ${fmt(a)} | ${fmt(b)} | ${(b / a).toFixed(2)}x | ${cores(`req/${r.label}/1`)}; ${cores(`req/${r.label}/2`)} |`);
  }
  lines.push('');
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
