/**
 * Requests per second from wrk (Debian's, written in C): one thread, keep-alive connections. It
 * costs a fraction of what autocannon (JavaScript, in the bench process) does per request, so on
 * this two-core machine a server with two workers can take most of the cores: the measure of
 * whether velodex uses every core, where autocannon would itself take one of the two.
 */
import { spawn } from 'node:child_process';

export interface WrkRun {
  reqPerSec: number;
  /** Responses that were not 2xx or 3xx, plus socket errors. */
  failures: number;
}

export async function wrk(url: string, headers: Record<string, string>, connections: number, seconds: number): Promise<WrkRun> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]), url];
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (b: Buffer) => (text += b.toString()));
    child.stderr.on('data', (b: Buffer) => (text += b.toString()));
    child.once('error', (err) => reject(new Error(`wrk could not start (hack/tools.sh installs it): ${err.message}`)));
    child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
  });
  const rate = /Requests\/sec:\s+([\d.]+)/.exec(out)?.[1];
  if (rate === undefined) throw new Error(`no Requests/sec in wrk's output: ${out}`);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const socketErrors = errors ? errors.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0;
  return { reqPerSec: Number(rate), failures: non2xx + socketErrors };
}
