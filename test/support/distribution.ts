/**
 * The CNCF distribution registry (hack/go-tools.sh builds it as `.tools/bin/distribution`) as a
 * real upstream for the pull-through suites: filesystem storage in a temp folder, token auth
 * against a `TokenServer`, started on a free 127.0.0.1 port and stopped by its PID.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tool } from './paths.js';
import { stopChild } from './stop-child.js';
import type { TokenServer } from './token-server.js';
import { until } from './until.js';
import { freePort } from './velodex.js';

export interface Distribution {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** `127.0.0.1:<port>`, as image references want it. */
  host: string;
  pid: number;
  logs(): string;
  stop(): Promise<void>;
}

export async function startDistribution(dir: string, tokens: TokenServer): Promise<Distribution> {
  const port = await freePort();
  const config = join(dir, 'distribution.yml');
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: warn',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${JSON.stringify(join(dir, 'data'))}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: 127.0.0.1:${port}`,
      'auth:',
      '  token:',
      `    realm: ${tokens.realm}`,
      `    service: ${tokens.service}`,
      `    issuer: ${tokens.issuer}`,
      `    jwks: ${JSON.stringify(tokens.jwksFile)}`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(tool('distribution'), ['serve', config], {
    env: { ...process.env, OTEL_TRACES_EXPORTER: 'none' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  const url = `http://127.0.0.1:${port}`;
  await until(
    'the distribution registry to answer /v2/',
    async () => {
      if (child.exitCode !== null) throw new Error(`distribution exited with ${child.exitCode}`);
      const res = await fetch(`${url}/v2/`);
      return res.status === 401 ? true : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 100, context: () => output },
  );
  return { url, host: `127.0.0.1:${port}`, pid: child.pid!, logs: () => output, stop: () => stopChild(child) };
}
