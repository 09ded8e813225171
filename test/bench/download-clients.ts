/**
 * Large downloads, one client process per connection, each fetching the URL again and again on
 * its keep-alive connection and discarding the bytes. Two clients:
 * - `curl`: what users run; it spends about a fifth of the CPU per byte that Node's own HTTP client
 *   does, but still copies every byte out of its socket;
 * - `discard` (discard-client.py): has the kernel drop the body without copying it out, so the
 *   clients cost this two-core machine about what clients on other machines would, and the
 *   server gets the cores. It is the measure of what a server can do with the cores it has.
 *
 * The rate counts whole transfers only: the bytes of the transfers that completed before the
 * deadline, over the time from the start to the last of those completions (a transfer still
 * running at the deadline counts neither its bytes nor its time).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { REPO, tool } from '../support/paths.js';

export type DownloadClient = 'curl' | 'discard';

export interface DownloadRun {
  bytesPerSec: number;
  transfers: number;
  /** Transfers that did not answer 200 or came short. */
  failures: number;
}

/** Transfers queued per connection: more than a run can finish (the deadline ends it). */
const QUEUED = 4000;

/** One client process on one connection; its report lines ("<status> <bytes>") on `reports`. */
function spawnClient(client: DownloadClient, url: string, seconds: number): { child: ChildProcess; reports: NodeJS.ReadableStream } {
  if (client === 'discard') {
    const u = new URL(url);
    const child = spawn(tool('python'), [join(REPO, 'test', 'bench', 'discard-client.py'), u.hostname, u.port, `${u.pathname}${u.search}`, String(seconds + 1)], { stdio: ['ignore', 'pipe', 'inherit'] });
    return { child, reports: child.stdout! };
  }
  // The report of each transfer goes to stderr, which curl does not buffer (stdout into a pipe it does).
  const child = spawn('curl', ['--silent', '--config', '-', '--write-out', '%{stderr}%{http_code} %{size_download}\\n'], { stdio: ['pipe', 'ignore', 'pipe'] });
  child.stdin!.end(`url = "${url}"\noutput = "/dev/null"\n`.repeat(QUEUED));
  return { child, reports: child.stderr! };
}

export async function downloadLoop(url: string, expectedBytes: number, connections: number, seconds: number, client: DownloadClient): Promise<DownloadRun> {
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const run = { bytes: 0, transfers: 0, failures: 0, lastDone: start };
  const children: ChildProcess[] = [];
  const exits = Array.from({ length: connections }, () => {
    const { child, reports } = spawnClient(client, url, seconds);
    children.push(child);
    createInterface({ input: reports }).on('line', (line) => count(run, line, expectedBytes, deadline));
    return new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', () => resolve());
    });
  });
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(exits);
  const elapsed = (run.lastDone - start) / 1000;
  return { bytesPerSec: elapsed > 0 ? run.bytes / elapsed : 0, transfers: run.transfers, failures: run.failures };
}

function count(run: { bytes: number; transfers: number; failures: number; lastDone: number }, line: string, expectedBytes: number, deadline: number): void {
  const now = performance.now();
  if (now > deadline) return;
  const [code, size] = line.split(' ').map(Number);
  if (code !== 200 || size !== expectedBytes) {
    run.failures++;
    return;
  }
  run.bytes += size;
  run.transfers++;
  run.lastDone = now;
}

/** `connections` curl processes download `url` once each, at the same time; resolves to the failures. */
export async function curlOnceEach(url: string, expectedBytes: number, connections: number): Promise<number> {
  const results = await Promise.all(
    Array.from(
      { length: connections },
      () =>
        new Promise<string>((resolve, reject) => {
          const child = spawn('curl', ['--silent', '--output', '/dev/null', '--write-out', '%{http_code} %{size_download}', url], { stdio: ['ignore', 'pipe', 'ignore'] });
          let out = '';
          child.stdout.on('data', (c: Buffer) => (out += c.toString()));
          child.once('error', reject);
          child.once('exit', () => resolve(out));
        }),
    ),
  );
  return results.filter((r) => r !== `200 ${expectedBytes}`).length;
}
