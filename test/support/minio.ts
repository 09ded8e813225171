/**
 * A real MinIO server for the storage suites: the binary `hack/go-tools.sh` builds from the Go
 * module proxy, started as a child process on free 127.0.0.1 ports with a fresh data folder and
 * freshly generated root credentials, and stopped by its PID.
 *
 * MinIO's defaults are overridden where they reach outside the test:
 * - the S3 API and the console listen on loopback only (MinIO's default is every interface);
 * - the console is off (`MINIO_BROWSER=off`), and the update check against MinIO's download site
 *   that a server runs at start-up is off (`MINIO_UPDATE=off`, `--quiet`);
 * - `HOME` and `--certs-dir` point into the fresh folder, so no `~/.minio` (whose certificates
 *   would switch the server to TLS) is read or written;
 * - the environment is built from scratch, so no `MINIO_*` variable of the caller leaks in.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'minio';
import { tool } from './paths.js';
import { freePort } from './pypiserver.js';
import { tempDir } from './velodex.js';
import { stopChild } from './stop-child.js';

export interface Minio {
  /** `http://127.0.0.1:<port>`: the S3 API. */
  endpoint: string;
  accessKey: string;
  secretKey: string;
  /** A bucket created for this server; more with `makeBucket`. */
  bucket: string;
  /** A client with the root credentials (path-style), for setting up and inspecting the bucket. */
  client: Client;
  makeBucket(name?: string): Promise<string>;
  /** Stops the server and keeps its data, so `start` brings the same bucket back. */
  pause(): Promise<void>;
  /** Starts the server again on the same port and data (after `pause`). */
  start(): Promise<void>;
  /** Stops the server and removes its data. */
  stop(): Promise<void>;
  /** The server's process id while it runs (benchmarks read its CPU time), else -1. */
  pid(): number;
}

const READY_TIMEOUT_MS = 60_000;

/**
 * MinIO's own count of the object GETs it has answered since it started. From its v3 metrics,
 * which are read fresh on every scrape: the v2 ones (`/minio/v2/metrics/node`) are cached for 10 s,
 * so two scrapes a few seconds apart show the same count whatever happened between them. With
 * `credentials`, a scrape of a server that wants a token (MinIO's default) sends one signed as
 * `mc admin prometheus generate` signs it: HS512 under the secret key, the access key as subject.
 */
export async function minioObjectGets(endpoint: string, credentials?: { accessKey: string; secretKey: string }): Promise<number> {
  const headers: Record<string, string> = credentials ? { authorization: `Bearer ${metricsToken(credentials.accessKey, credentials.secretKey)}` } : {};
  const res = await fetch(`${endpoint}/minio/metrics/v3/api/requests`, { headers, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`MinIO's metrics: ${res.status} ${text.slice(0, 300)}`);
  // No line at all until it has answered a first GET.
  return [...text.matchAll(/^minio_api_requests_total\{[^}]*name="GetObject"[^}]*\} (\S+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

function metricsToken(accessKey: string, secretKey: string): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${part({ alg: 'HS512', typ: 'JWT' })}.${part({ sub: accessKey, iss: 'prometheus', exp: Math.floor(Date.now() / 1000) + 600 })}`;
  return `${unsigned}.${createHmac('sha512', secretKey).update(unsigned).digest('base64url')}`;
}

export async function startMinio(): Promise<Minio> {
  const exe = tool('minio');
  const root = tempDir('velodex-minio-');
  const data = join(root, 'data');
  const home = join(root, 'home');
  mkdirSync(data, { recursive: true });
  mkdirSync(join(home, 'certs'), { recursive: true });
  const port = await freePort();
  const consolePort = await freePort();
  // Generated per server: no fixed test password that could open some other MinIO.
  const accessKey = `velodex-${randomBytes(6).toString('hex')}`;
  const secretKey = randomBytes(24).toString('base64url');
  const endpoint = `http://127.0.0.1:${port}`;

  const client = new Client({
    endPoint: '127.0.0.1',
    port,
    useSSL: false,
    accessKey,
    secretKey,
    pathStyle: true,
    region: 'us-east-1',
    retryOptions: { disableRetry: true },
  });
  let server: Running | null = null;
  const launch = async () => {
    const args = ['server', data, '--address', `127.0.0.1:${port}`, '--console-address', `127.0.0.1:${consolePort}`, '--certs-dir', join(home, 'certs'), '--quiet'];
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      MINIO_ROOT_USER: accessKey,
      MINIO_ROOT_PASSWORD: secretKey,
      MINIO_BROWSER: 'off',
      MINIO_UPDATE: 'off',
      // Its request counters readable without a token (`minioObjectGets`): tests count what a read cost the store.
      MINIO_PROMETHEUS_AUTH_TYPE: 'public',
    };
    server = await run(exe, args, env, endpoint, client);
  };
  await launch();

  const makeBucket = async (name = `velodex-${randomBytes(4).toString('hex')}`) => {
    await client.makeBucket(name, 'us-east-1');
    return name;
  };
  const bucket = await makeBucket('velodex-test');
  const halt = async () => {
    const s = server;
    server = null;
    if (s) await s.stop();
  };
  return {
    endpoint,
    accessKey,
    secretKey,
    bucket,
    client,
    makeBucket,
    pause: halt,
    start: async () => {
      if (!server) await launch();
    },
    stop: async () => {
      await halt();
      rmSync(root, { recursive: true, force: true });
    },
    pid: () => server?.pid ?? -1,
  };
}

interface Running {
  pid: number;
  stop(): Promise<void>;
}

async function run(exe: string, args: string[], env: NodeJS.ProcessEnv, endpoint: string, client: Client): Promise<Running> {
  const child = spawn(exe, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const keep = (b: Buffer) => {
    // Enough to explain a failed start; a long-running server's log is not kept whole.
    log = (log + b.toString()).slice(-20_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  try {
    await waitLive(endpoint, child, () => log);
    await waitServing(client, child, () => log);
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return { pid: child.pid ?? -1, stop: () => stopChild(child) };
}

/** MinIO answers 200 on `/minio/health/live` (no credentials needed) once it serves requests. */
async function waitLive(endpoint: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`minio exited before it was ready:\n${log()}`);
    try {
      const res = await fetch(`${endpoint}/minio/health/live`);
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`minio did not become ready at ${endpoint} within ${READY_TIMEOUT_MS / 1000} s:\n${log()}`);
}

/**
 * `live` answers while the object layer is still starting, when S3 requests get 503
 * (XMinioServerNotInitialized): a suite starts only once an authenticated request succeeds.
 */
async function waitServing(client: Client, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`minio exited before it served requests:\n${log()}`);
    try {
      await client.listBuckets();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`minio did not serve S3 requests within ${READY_TIMEOUT_MS / 1000} s (${String(err)}):\n${log()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

