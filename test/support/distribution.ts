/**
 * The CNCF distribution registry (hack/go-tools.sh builds it as `.tools/bin/distribution`) as a
 * real upstream for the pull-through suites: filesystem storage in a temp folder, token auth
 * against a `TokenServer` (or none), started on a free port of 127.0.0.1 (or of `host`, an address
 * the test created) and stopped by its PID.
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
  /** `http://<host>:<port>`. */
  url: string;
  /** `<host>:<port>`, as image references want it. */
  host: string;
  pid: number;
  logs(): string;
  stop(): Promise<void>;
}

export interface DistributionOptions {
  /** The address to listen on (default 127.0.0.1). */
  host?: string;
}

/** `tokens`: the token server it trusts; null runs it without authentication. */
export async function startDistribution(dir: string, tokens: TokenServer | null, opts: DistributionOptions = {}): Promise<Distribution> {
  const port = await freePort();
  const host = opts.host ?? '127.0.0.1';
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
      `  addr: ${host}:${port}`,
      ...(tokens
        ? ['auth:', '  token:', `    realm: ${tokens.realm}`, `    service: ${tokens.service}`, `    issuer: ${tokens.issuer}`, `    jwks: ${JSON.stringify(tokens.jwksFile)}`]
        : []),
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
  const url = `http://${host}:${port}`;
  await until(
    'the distribution registry to answer /v2/',
    async () => {
      if (child.exitCode !== null) throw new Error(`distribution exited with ${child.exitCode}`);
      const res = await fetch(`${url}/v2/`);
      return res.status === (tokens ? 401 : 200) ? true : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 100, context: () => output },
  );
  return { url, host: `${host}:${port}`, pid: child.pid!, logs: () => output, stop: () => stopChild(child) };
}
