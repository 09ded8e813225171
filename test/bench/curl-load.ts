/**
 * Large downloads driven by curl, one process per connection, each fetching the URL again and
 * again on its keep-alive connection and discarding the bytes. curl spends about a fifth of the
 * CPU per byte that Node's own HTTP client does; on a two-core machine that shares its cores
 * between load and server, a Node client would cap the fastest servers and hide their differences.
 *
 * The rate counts whole transfers only: the bytes of the transfers that completed before the
 * deadline, over the time from the start to the last of those completions (a transfer still
 * running at the deadline counts neither its bytes nor its time).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface CurlRun {
  bytesPerSec: number;
  transfers: number;
  /** Transfers that did not answer 200 or came short. */
  failures: number;
}

/** Transfers queued per connection: more than a run can finish (the deadline ends it). */
const QUEUED = 4000;

export async function curlDownloads(url: string, expectedBytes: number, connections: number, seconds: number): Promise<CurlRun> {
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const run = { bytes: 0, transfers: 0, failures: 0, lastDone: start };
  const config = `url = "${url}"\noutput = "/dev/null"\n`.repeat(QUEUED);
  const children: ChildProcess[] = [];
  const exits = Array.from({ length: connections }, () => {
    // The report of each transfer goes to stderr, which curl does not buffer (stdout into a pipe it does).
    const child = spawn('curl', ['--silent', '--config', '-', '--write-out', '%{stderr}%{http_code} %{size_download}\\n'], { stdio: ['pipe', 'ignore', 'pipe'] });
    children.push(child);
    child.stdin?.end(config);
    if (child.stderr) createInterface({ input: child.stderr }).on('line', (line) => count(run, line, expectedBytes, deadline));
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
