/**
 * Starts the real `velodex` bin as a child process on 127.0.0.1 with a fresh data dir, the way a
 * user would, and stops it. The server's stdout (JSON log lines) is kept for assertions.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { configFor } from './backend.js';
import { tempDir } from './temp-dirs.js';
import { CLI, REPO } from './paths.js';
import { stopChild } from './stop-child.js';

export { tempDir };

export interface Velodex {
  url: string;
  port: number;
  dataDir: string;
  pid: number;
  /** Every line the server printed so far (stdout and stderr). */
  logs(): string;
  /** Peak resident memory of the server process so far, in bytes (Linux VmHWM). */
  peakRss(): number;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** TOML config text; without it the embedded default runs. */
  config?: string;
  env?: Record<string, string>;
  args?: string[];
  dataDir?: string;
  /**
   * Listen on this port and wait for `/healthz` instead of the "velodex listening" line, for a
   * log level that hides it.
   */
  port?: number;
  /**
   * On an s3 run, the `[storage]` table to use (`s3StorageToml`), for processes that must share
   * one store; by default each server gets a store of its own. Ignored on an fs run.
   */
  storage?: string;
}


export async function startVelodex(opts: StartOptions = {}): Promise<Velodex> {
  const dataDir = opts.dataDir ?? tempDir();
  const args = [CLI, 'serve', '--host', '127.0.0.1', '--port', String(opts.port ?? 0), '--data-dir', dataDir, ...(opts.args ?? [])];
  const config = configFor(opts.config, dataDir, opts.storage, { ...process.env, ...opts.env });
  if (config !== undefined) {
    const path = join(dataDir, 'velodex.toml');
    writeFileSync(path, config);
    args.push('--config', path);
  }
  const child = spawn(process.execPath, args, {
    cwd: REPO,
    // One process unless a test asks for workers (test/workers/ does): the suites check one
    // server's behaviour, and auto would give every server one worker per core of the machine.
    env: { ...process.env, VELODEX_LOG_LEVEL: 'info', VELODEX_WORKERS: '1', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr.on('data', (b: Buffer) => (output += b.toString()));

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`velodex did not start within 20s:\n${output}`)), 20_000);
    const done = (url: string) => {
      clearTimeout(timer);
      child.stdout.off('data', onData);
      resolve(url);
    };
    const onData = () => {
      for (const line of output.split('\n')) {
        if (line.includes('"velodex listening"')) return done((JSON.parse(line) as { url: string }).url);
      }
    };
    child.stdout.on('data', onData);
    if (opts.port !== undefined) void untilHealthy(`http://127.0.0.1:${opts.port}`, child).then(done, () => undefined);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`velodex exited with ${code} before listening:\n${output}`));
    });
  });

  return {
    url,
    port: Number(new URL(url).port),
    dataDir,
    pid: child.pid ?? -1,
    logs: () => output,
    peakRss: () => peakRss(child),
    stop: () => stopChild(child),
  };
}

/** Resolves with `url` once `/healthz` answers; rejects when the child exits first. */
async function untilHealthy(url: string, child: ChildProcess): Promise<string> {
  while (child.exitCode === null) {
    const ok = await fetch(`${url}/healthz`).then((r) => r.ok, () => false);
    if (ok) return url;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('exited');
}

/** A port nothing listens on right now, for a server that must be told its port. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function peakRss(child: ChildProcess): number {
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  const m = /VmHWM:\s+(\d+) kB/.exec(status);
  if (!m?.[1]) throw new Error('no VmHWM in /proc status');
  return Number(m[1]) * 1024;
}

/** The default config's upload token, as a user would read it from the data dir. */
export function defaultToken(server: Velodex): string {
  return readFileSync(join(server.dataDir, 'upload-token'), 'utf8').trim();
}

export function basicAuth(token: string, user = '__token__'): string {
  return `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;
}
