/**
 * A private containerd daemon for the `ctr` suite: its own root, state, socket and opt folder
 * under a temp dir, no CRI plugin, started as a child process and stopped by its PID. Nothing of
 * the machine's containerd (if one runs) is used or touched.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { tool } from './paths.js';
import { run, type RunOptions, type RunResult } from './run.js';
import { stopChild } from './stop-child.js';

export interface Containerd {
  /** The daemon's gRPC socket, for `ctr --address`. */
  socket: string;
  /** Runs `ctr --address <socket> ...args`. */
  ctr(args: string[], opts?: RunOptions): Promise<RunResult>;
  /** What the daemon printed so far. */
  logs(): string;
  stop(): Promise<void>;
}

function configToml(dir: string, socket: string): string {
  return [
    'version = 2',
    `root = ${JSON.stringify(join(dir, 'root'))}`,
    `state = ${JSON.stringify(join(dir, 'state'))}`,
    'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
    '[grpc]',
    `  address = ${JSON.stringify(socket)}`,
    '[ttrpc]',
    `  address = ${JSON.stringify(`${socket}.ttrpc`)}`,
    '[plugins."io.containerd.internal.v1.opt"]',
    `  path = ${JSON.stringify(join(dir, 'opt'))}`,
    '',
  ].join('\n');
}

/** Starts containerd in `dir` (which must exist) and waits until `ctr version` reaches it. */
export async function startContainerd(dir: string): Promise<Containerd> {
  const socket = join(dir, 'containerd.sock');
  const config = join(dir, 'config.toml');
  writeFileSync(config, configToml(dir, socket));
  const child = spawn(tool('containerd'), ['--config', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr.on('data', (b: Buffer) => (output += b.toString()));
  const ctr = (args: string[], opts: RunOptions = {}) => run(tool('ctr'), ['--address', socket, ...args], opts);
  const daemon: Containerd = { socket, ctr, logs: () => output, stop: () => stopChild(child, 10_000) };
  for (let attempt = 0; attempt < 100; attempt++) {
    if (child.exitCode !== null) throw new Error(`containerd exited with ${child.exitCode}:\n${output}`);
    if ((await ctr(['version'], { allowFailure: true, timeoutMs: 10_000 })).code === 0) return daemon;
    await sleep(100);
  }
  await daemon.stop();
  throw new Error(`containerd did not answer on ${socket} within 10s:\n${output}`);
}

