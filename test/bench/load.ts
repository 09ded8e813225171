/**
 * The load generators (in this process) and the table the bench prints. Every run is bounded by a
 * fixed duration; nothing here judges a number, it only reports it.
 *
 *   measure:         autocannon, for pages, manifests and small files (many requests per second).
 *   measureDownload: Node's own HTTP client (llhttp) on keep-alive connections, for large files.
 *                    autocannon parses bodies in JavaScript and tops out at ~25-50 MiB/s on this
 *                    machine for a 20 MiB response, while curl reads 300-600 MB/s from the same
 *                    servers: with autocannon the download rows would measure autocannon.
 */
import { Agent, get } from 'node:http';
import autocannon from 'autocannon';

export interface Target {
  url: string;
  headers?: Record<string, string>;
}

export interface Load {
  connections: number;
  /** Seconds measured. */
  duration: number;
  /** Seconds of unrecorded load first, so every cache is warm. */
  warmup: number;
}

export interface Measured {
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  bytesPerSec: number;
  /** Responses that were not 2xx, connection errors and timeouts, all counted together. */
  failures: number;
  requests: number;
}

async function cannon(target: Target, connections: number, duration: number): Promise<autocannon.Result> {
  return autocannon({ url: target.url, headers: target.headers ?? {}, connections, duration, pipelining: 1, timeout: 30 });
}

export async function measure(target: Target, load: Load): Promise<Measured> {
  if (load.warmup > 0) await cannon(target, load.connections, load.warmup);
  const r = await cannon(target, load.connections, load.duration);
  return {
    reqPerSec: r['2xx'] / r.duration,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    bytesPerSec: r.throughput.average,
    failures: r.non2xx + r.errors + r.timeouts,
    requests: r['2xx'],
  };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

/**
 * `load.connections` loops each download the target again and again until the deadline. Bytes
 * count as they arrive within the measured window (so a half-read file counts its half); a request
 * counts (and its latency, to the last byte) when it completes within the window.
 */
export async function measureDownload(target: Target, load: Load): Promise<Measured> {
  const agent = new Agent({ keepAlive: true, maxSockets: load.connections });
  try {
    if (load.warmup > 0) await downloadPhase(target, agent, load.connections, load.warmup);
    return await downloadPhase(target, agent, load.connections, load.duration);
  } finally {
    agent.destroy();
  }
}

async function downloadPhase(target: Target, agent: Agent, connections: number, seconds: number): Promise<Measured> {
  const start = performance.now();
  const deadline = start + seconds * 1000;
  let bytes = 0;
  let failures = 0;
  const latencies: number[] = [];
  const once = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = get(target.url, { agent, headers: target.headers ?? {}, timeout: 30_000 }, (res) => {
        res.on('data', (chunk: Buffer) => {
          if (performance.now() <= deadline) bytes += chunk.length;
        });
        res.on('end', () => {
          const t1 = performance.now();
          if (res.statusCode !== 200) failures++;
          else if (t1 <= deadline) latencies.push(t1 - t0);
          resolve();
        });
        res.on('error', () => {
          failures++;
          resolve();
        });
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => {
        failures++;
        resolve();
      });
    });
  const loop = async () => {
    while (performance.now() < deadline) await once();
  };
  await Promise.all(Array.from({ length: connections }, loop));
  latencies.sort((a, b) => a - b);
  return {
    reqPerSec: latencies.length / seconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    bytesPerSec: bytes / seconds,
    failures,
    requests: latencies.length,
  };
}

export interface Row {
  scenario: string;
  connections: number;
  velodex: Measured;
  /** Absent when the peer has no such endpoint. */
  peer?: Measured;
  /** Why there is no peer number. */
  peerNote?: string;
  /** Compare bytes per second instead of requests per second (large downloads: few requests). */
  byThroughput?: boolean;
}

const MiB = 1024 * 1024;

function num(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function cell(m: Measured | undefined, f: (m: Measured) => string): string {
  if (!m) return '-';
  return f(m) + (m.failures > 0 ? ' !' : '');
}

function ratio(r: Row): string {
  if (!r.peer) return '-';
  const [v, p] = r.byThroughput ? [r.velodex.bytesPerSec, r.peer.bytesPerSec] : [r.velodex.reqPerSec, r.peer.reqPerSec];
  return p > 0 ? `${num(v / p, 2)}x${r.byThroughput ? '*' : ''}` : '-';
}

/** A Markdown table: it reads as well in a terminal as pasted into docs/benchmarks.md. */
export function table(title: string, peerName: string, rows: Row[]): string {
  const head = [
    'scenario',
    'conns',
    'velodex req/s',
    `${peerName} req/s`,
    'ratio',
    'velodex p99 ms',
    `${peerName} p99 ms`,
    'velodex MiB/s',
    `${peerName} MiB/s`,
  ];
  const body = rows.map((r) => [
    r.scenario,
    String(r.connections),
    cell(r.velodex, (m) => num(m.reqPerSec)),
    r.peer ? cell(r.peer, (m) => num(m.reqPerSec)) : (r.peerNote ?? '-'),
    ratio(r),
    cell(r.velodex, (m) => num(m.p99Ms)),
    cell(r.peer, (m) => num(m.p99Ms)),
    cell(r.velodex, (m) => num(m.bytesPerSec / MiB, 1)),
    cell(r.peer, (m) => num(m.bytesPerSec / MiB, 1)),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i < 2 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i < 2 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  const failed = rows.some((r) => r.velodex.failures > 0 || (r.peer?.failures ?? 0) > 0);
  return [
    `### ${title}`,
    '',
    line(head),
    rule,
    ...body.map(line),
    '',
    'ratio = velodex req/s / peer req/s (above 1: velodex served more); * = ratio of MiB/s instead (a large download',
    'completes only a few times per run, bytes received count continuously; measured with Node\'s HTTP client, not',
    'autocannon). p99 latency in ms, to the last byte.',
    ...(failed ? ['"!" = some responses were not 2xx or failed during that run: its number is not comparable.'] : []),
  ].join('\n');
}
