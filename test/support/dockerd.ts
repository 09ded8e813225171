/**
 * A private Docker engine for the `docker` suite: Debian's dockerd with its own data root, exec
 * root, pid file, socket and daemon.json under a temp dir, started as a child process and stopped
 * by its PID (and the containerd it started, by that one's PID). Nothing of the machine's Docker
 * (its /etc/docker/daemon.json, /var/lib/docker, its socket, ~/.docker) is read or touched.
 *
 * It runs where the suites run: `vfs` storage (no overlay mounts), no iptables rules, no bridge
 * network (nothing here runs a container; images are imported, pushed and pulled). Docker allows
 * plain HTTP to registries on 127.0.0.0/8 without being told, which is where velodex listens.
 *
 * `trust` gives registries a CA the engine trusts for them, the way an operator does it: a
 * `certs.d/<host>/ca.crt`. dockerd reads those only from /etc/docker/certs.d, so an engine with
 * `trust` runs in a mount namespace of its own (unshare) where a folder under `dir` is mounted on
 * /etc/docker: the machine's /etc/docker is neither read nor written.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { tool } from './paths.js';
import { run, type RunOptions, type RunResult } from './run.js';
import { stopChild } from './stop-child.js';

const READY_TIMEOUT_MS = 60_000;

export interface Dockerd {
  /** `unix://...`: the engine's API socket. */
  host: string;
  /** The docker CLI's config folder (credentials of `docker login` land in its config.json). */
  configDir: string;
  /** Runs `docker ...args` against this engine with this config folder. */
  docker(args: string[], opts?: RunOptions): Promise<RunResult>;
  /** What the daemon printed so far. */
  logs(): string;
  stop(): Promise<void>;
}

export interface DockerdOptions {
  /** Registries (`host` or `host:port`, as docker is given them) and the CA file each is trusted with. */
  trust?: { registry: string; caFile: string }[];
}

/** Starts dockerd in `dir` (which must exist) and waits until `docker version` reaches it. */
export async function startDockerd(dir: string, options: DockerdOptions = {}): Promise<Dockerd> {
  const socket = join(dir, 'docker.sock');
  const host = `unix://${socket}`;
  const configDir = join(dir, 'cli');
  const execRoot = join(dir, 'exec');
  mkdirSync(configDir, { recursive: true });
  const daemonJson = join(dir, 'daemon.json');
  writeFileSync(daemonJson, `${JSON.stringify({ 'log-level': 'info' })}\n`);
  const args = [
    '--config-file', daemonJson,
    '--data-root', join(dir, 'root'),
    '--exec-root', execRoot,
    '--pidfile', join(dir, 'docker.pid'),
    '-H', host,
    '--storage-driver', 'vfs',
    '--iptables=false',
    '--ip6tables=false',
    '--bridge=none',
  ];
  const child = options.trust === undefined ? spawn(tool('dockerd'), args, { stdio: ['ignore', 'pipe', 'pipe'] }) : spawnTrusting(dir, options.trust, args);
  let output = '';
  child.stdout.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr.on('data', (b: Buffer) => (output += b.toString()));
  const env = { DOCKER_HOST: host, DOCKER_CONFIG: configDir };
  const docker = (cliArgs: string[], opts: RunOptions = {}) => run(tool('docker'), cliArgs, { ...opts, env: { ...env, ...opts.env } });
  const stop = async () => {
    // The containerd dockerd started for itself; SIGTERM to dockerd stops it too, a SIGKILL would not.
    const containerdPid = readPid(join(execRoot, 'containerd', 'containerd.pid'));
    await stopChild(child, 20_000);
    if (containerdPid !== null && alive(containerdPid)) {
      process.kill(containerdPid, 'SIGTERM');
      for (let i = 0; i < 50 && alive(containerdPid); i++) await sleep(100);
      if (alive(containerdPid)) process.kill(containerdPid, 'SIGKILL');
    }
  };
  const daemon: Dockerd = { host, configDir, docker, logs: () => output, stop };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`dockerd exited with ${child.exitCode}:\n${output}`);
    if ((await docker(['version'], { allowFailure: true, timeoutMs: 10_000 })).code === 0) return daemon;
    await sleep(200);
  }
  await stop();
  throw new Error(`dockerd did not answer on ${socket} within ${READY_TIMEOUT_MS / 1000} s:\n${output}`);
}

/**
 * dockerd in a mount namespace whose /etc/docker is `dir/etc-docker` (with certs.d/<registry>/ca.crt).
 * unshare and sh exec in turn, so the child's PID is dockerd's and stopping it works as without.
 */
function spawnTrusting(dir: string, trust: { registry: string; caFile: string }[], args: string[]) {
  const etc = join(dir, 'etc-docker');
  for (const { registry, caFile } of trust) {
    mkdirSync(join(etc, 'certs.d', registry), { recursive: true });
    copyFileSync(caFile, join(etc, 'certs.d', registry, 'ca.crt'));
  }
  const script = 'mount --bind "$0" /etc/docker && exec "$@"';
  return spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script, etc, tool('dockerd'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
}

function readPid(path: string): number | null {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Whether a process with this pid exists (signal 0 probes without signalling). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
