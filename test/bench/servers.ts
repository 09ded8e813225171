/**
 * The servers a bench run compares, each started as a child process on 127.0.0.1 with its request
 * logging off (so every server is measured serving, not writing access logs), and each stopped
 * again by its PID. Every child is tracked here, so `stopAll` can end them whatever went wrong.
 *
 * test/support/velodex.ts and test/support/pypiserver.ts start the same programs for the suites,
 * but with per-request logging into the test process (the suites assert on it); a bench wants the
 * servers quiet and their output in a file, so the bench has its own launchers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { hosted, oci, toml, type ConfigPart } from '../support/config.js';
import { CLI, REPO, TOOLS, tool } from '../support/paths.js';
import { freePort } from '../support/pypiserver.js';
import { stopChild } from '../support/stop-child.js';
import { MALLOC_TUNABLES } from '../../registry/src/workers/allocator-env.js';
import { SERVING_V8_FLAGS } from '../../registry/src/workers/v8-flags.js';

export interface Server {
  name: string;
  url: string;
  pid: number;
  /** Where the server's stdout and stderr go. */
  logFile: string;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();

/** The Distribution registry `make bench-tools` builds (absent when it could not be built). */
export const DISTRIBUTION = join(TOOLS, 'bin', 'registry');

/** Why there is no Distribution registry binary, in words for the output. */
export function distributionMissing(): string | undefined {
  if (existsSync(DISTRIBUTION)) return undefined;
  const note = join(TOOLS, 'bin', '.registry.unavailable');
  if (existsSync(note)) return readFileSync(note, 'utf8').trim();
  return `${DISTRIBUTION} is not installed: run "make bench-tools"`;
}

export function distributionVersion(): string {
  const stamp = join(TOOLS, 'bin', '.registry.version');
  return existsSync(stamp) ? readFileSync(stamp, 'utf8').trim() : 'unknown';
}

export interface Launch {
  name: string;
  cmd: string;
  args: string[];
  env?: Record<string, string>;
  logFile: string;
  url: string;
  /** A URL that answers 200 once the server is ready. */
  ready: string;
}

/** Starts a server as a tracked child process and resolves once `ready` answers 200. */
export async function launchServer(l: Launch): Promise<Server> {
  const fd = openSync(l.logFile, 'a');
  const child = spawn(l.cmd, l.args, { cwd: REPO, env: { ...process.env, ...l.env }, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  running.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => running.delete(child));
  const server: Server = { name: l.name, url: l.url, pid: child.pid ?? -1, logFile: l.logFile, stop: () => stopChild(child) };
  const log = () => (existsSync(l.logFile) ? readFileSync(l.logFile, 'utf8').slice(-4000) : '');
  for (let attempt = 0; attempt < 300; attempt++) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${l.name} exited before it was ready:\n${log()}`);
    try {
      const res = await fetch(l.ready);
      await res.arrayBuffer();
      if (res.ok) return server;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await server.stop();
  throw new Error(`${l.name} did not become ready at ${l.ready} within 30 s:\n${log()}`);
}

/** Stops every server still running (by PID), e.g. after a setup error or on Ctrl-C. */
export async function stopAll(): Promise<void> {
  await Promise.all(
    [...running].map((child) => stopChild(child)),
  );
}

/**
 * velodex with the embedded default (hosted Python index `root/hosted`, hosted OCI index
 * `root/oci`), or with the `extra` parts added to a config file that serves the same two indexes.
 */
export async function startVelodexBench(dataDir: string, logLevel: 'warn' | 'info', logFile: string, extra?: readonly ConfigPart[], workers = 1): Promise<Server> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const config: string[] = [];
  if (extra !== undefined) {
    const file = join(dataDir, `bench-${port}.toml`);
    const token = join(dataDir, 'upload-token');
    writeFileSync(file, toml(...extra, hosted('hosted', { token: { file: token } }), oci.hosted('oci', { token: { file: token } })));
    config.push('--config', file);
  }
  return launchServer({
    name: `velodex (log_level ${logLevel}, ${workers} worker${workers === 1 ? '' : 's'})`,
    cmd: process.execPath,
    // The V8 flags of the image's command line (Dockerfile), so one process runs as a pod's does.
    args: [...SERVING_V8_FLAGS, CLI, 'serve', '--host', '127.0.0.1', '--port', String(port), '--data-dir', dataDir, ...config],
    // One process unless asked: auto would give one worker per core, and the rows compare processes.
    // The allocator setting of the image (Dockerfile), so one process runs as a pod's does.
    env: { VELODEX_LOG_LEVEL: logLevel, VELODEX_WORKERS: String(workers), GLIBC_TUNABLES: MALLOC_TUNABLES },
    logFile,
    url,
    ready: `${url}/root/hosted/simple/`,
  });
}

/**
 * pypiserver serving `dir` (no authentication, no fallback, default verbosity). Its `auto` server
 * is waitress when waitress is installed (hack/python-tools.txt pins it); run.ts checks the
 * `Server` header to be sure.
 */
export async function startPypiserverBench(dir: string, logFile: string): Promise<Server> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  return launchServer({
    name: 'pypiserver',
    cmd: tool('pypi-server'),
    args: ['run', '-p', String(port), '-i', '127.0.0.1', '-a', '.', '-P', '.', '--disable-fallback', '--server', 'auto', dir],
    logFile,
    url,
    ready: `${url}/health`,
  });
}

/**
 * The Distribution registry with the in-memory blob-descriptor cache its own example configuration
 * ships, no authentication and the access log off; `extra` adds top-level lines (its proxy mode). `storage`: the lines of its storage driver
 * (indented under `storage:`); by default the filesystem driver under `rootDir`.
 */
export async function startDistribution(
  rootDir: string,
  configFile: string,
  logFile: string,
  storage?: string[],
  name = 'distribution',
  /** More top-level config lines (a `proxy:` section for its pull-through mode). */
  extra: string[] = [],
): Promise<Server> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const driver = storage ?? ['  filesystem:', `    rootdirectory: ${JSON.stringify(rootDir)}`];
  writeFileSync(
    configFile,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      ...driver,
      '  cache:',
      '    blobdescriptor: inmemory',
      'http:',
      `  addr: 127.0.0.1:${port}`,
      ...extra,
      '',
    ].join('\n'),
  );
  return launchServer({
    name,
    cmd: DISTRIBUTION,
    args: ['serve', configFile],
    env: { OTEL_TRACES_EXPORTER: 'none' },
    logFile,
    url,
    ready: `${url}/v2/`,
  });
}
