/**
 * pypiserver, the real third-party upstream of the cached-index suites: started as a process on a
 * free 127.0.0.1 port, serving one folder with no authentication and no fallback to any public
 * index, and stopped again. Requests are counted from its verbose log (or put a FaultProxy in
 * front of it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { tool } from './paths.js';

export interface PypiServer {
  /** The root URL; the Simple API is under `${url}/simple/`, files under `${url}/packages/`. */
  url: string;
  port: number;
  /** Request paths seen so far, in order (from the access log). */
  requests(): string[];
  /** How many requests asked for `path` (query excluded). */
  count(path: string): number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

export interface PypiServerOptions {
  /** The address to listen on (default 127.0.0.1; the cluster suite uses its own bridge's). */
  host?: string;
  /** A fixed port, to start it again where a client expects it (default: a free one). */
  port?: number;
}

/** Starts pypiserver serving `dir`; resolves once it answers its health endpoint. */
export async function startPypiserver(dir: string, opts: PypiServerOptions = {}): Promise<PypiServer> {
  const exe = tool('pypi-server');
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? (await freePort());
  const child = spawn(
    exe,
    ['run', '-p', String(port), '-i', host, '-a', '.', '-P', '.', '--disable-fallback', '-v', '--log-stream', 'stderr', dir],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  child.stdout.on('data', (b: Buffer) => (log += b.toString()));
  child.stderr.on('data', (b: Buffer) => (log += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://${host}:${port}`;
  await waitHealthy(url, child, exited, () => log);
  // The readiness probes are not the test's requests.
  const skip = paths(log).length;
  const requests = (): string[] => paths(log).slice(skip);
  return {
    url,
    port,
    requests,
    count: (path) => requests().filter((p) => p === path).length,
    stop: () => stop(child, exited),
  };
}

// pypiserver -v logs each request as `<LocalRequest: GET http://host:port/path?query>`.
const REQUEST_LINE = /<LocalRequest: [A-Z]+ https?:\/\/[^/\s>]+([^\s>?]*)[^\s>]*>/g;

function paths(log: string): string[] {
  return [...log.matchAll(REQUEST_LINE)].map((m) => m[1] || '/');
}

async function waitHealthy(url: string, child: ChildProcess, exited: Promise<number | null>, log: () => string): Promise<void> {
  let done = false;
  void exited.then(() => (done = true));
  for (let attempt = 0; attempt < 300; attempt++) {
    if (done) throw new Error(`pypi-server exited before it was ready:\n${log()}`);
    try {
      const res = await fetch(`${url}/health`);
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`pypi-server did not become ready at ${url}:\n${log()}`);
}

async function stop(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}
