/**
 * The commands the README and every doc use, as a newcomer runs them in a fresh clone: `npm ci`,
 * `npm run build`, then `npx velodex check-config` and `npx velodex serve`. (npm links a
 * package's bin at install time, before the build has written dist/, so this once failed with
 * "could not determine executable to run".) The clone is of the committed tree.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hosted, toml } from '../support/config.js';
import { REPO } from '../support/paths.js';
import { run } from '../support/run.js';
import { tempDir } from '../support/velodex.js';

let clone: string;

beforeAll(async () => {
  clone = join(tempDir('velodex-clone-'), 'velodex');
  await run('git', ['clone', '--quiet', '--no-hardlinks', REPO, clone]);
  // The package cache that `make test`'s own `npm ci` filled makes this a local copy.
  await run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: clone, timeoutMs: 240_000 });
});

afterAll(async () => {
  if (clone) await run('rm', ['-rf', clone]);
});

const npx = (args: string[]) => run('npx', ['--no-install', 'velodex', ...args], { cwd: clone, allowFailure: true, timeoutMs: 60_000 });

describe('npx velodex in a fresh clone', () => {
  it('says how to build before the build, instead of failing to find the command', async () => {
    const res = await npx(['--help']);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('velodex is not built yet: run `npm run build`');
  });

  it('checks a config and serves once built', async () => {
    await run('npm', ['run', '--silent', 'build'], { cwd: clone, timeoutMs: 240_000 });
    const config = join(clone, 'velodex.toml');
    writeFileSync(config, toml(hosted('hosted', { token: 'fresh-clone-token' })));
    const check = await npx(['check-config', config]);
    expect(check.code).toBe(0);
    expect(check.stdout).toContain(`${config}: ok`);
    expect(check.stdout).toContain('index hosted: /root/hosted/ python hosted');

    // Its own process group, so the stop reaches npx and the server under it.
    const serve = spawn('npx', ['--no-install', 'velodex', 'serve', '--port', '0', '--config', config, '--data-dir', join(clone, 'data')], {
      cwd: clone,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(() => reject(new Error(`no listening line within 30s:\n${out}`)), 30_000);
        serve.stdout.on('data', (b: Buffer) => {
          out += b.toString();
          const line = out.split('\n').find((l) => l.includes('"velodex listening"'));
          if (!line) return;
          clearTimeout(timer);
          resolve((JSON.parse(line) as { url: string }).url);
        });
        serve.once('exit', (code) => reject(new Error(`npx velodex serve exited with ${code}:\n${out}`)));
      });
      const page = await fetch(`${url}/root/hosted/simple/`);
      expect(page.status).toBe(200);
    } finally {
      const exited = new Promise((resolve) => serve.once('exit', resolve));
      process.kill(-(serve.pid ?? 0), 'SIGTERM');
      await exited;
    }
  });
});
