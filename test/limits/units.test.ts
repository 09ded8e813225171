/**
 * The pure parts around the limiter: `trusted_proxies` (top level, or the older spelling under
 * `[rate_limit]`) and `[connections]` are validated at load with an error naming the key; the
 * per-address connection count; and each ecosystem classes its requests from method and path
 * segments alone.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../registry/src/config/errors.js';
import { parseConfigText } from '../../registry/src/config/load.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { ConnectionCap } from '../../registry/src/limits/connection-cap.js';
import { classifyOci } from '../../registry/src/oci/classify.js';
import { classifyPython } from '../../registry/src/python/classify.js';
import { CLI } from '../support/paths.js';
import { run } from '../support/run.js';
import { tempDir } from '../support/velodex.js';

const loadText = (text: string) => parseConfigText(text, 'test.toml', { ecosystems, env: {} });
const load = (rateLimit: string) => loadText(`[rate_limit]\n${rateLimit}\n`);

const PARSED = [
  { address: '127.0.0.1', prefix: 32, family: 'ipv4' },
  { address: '10.0.0.0', prefix: 8, family: 'ipv4' },
  { address: '::1', prefix: 128, family: 'ipv6' },
  { address: 'fd00::', prefix: 8, family: 'ipv6' },
];

describe('trusted_proxies', () => {
  it('takes IPv4 and IPv6 addresses and networks, at the top level', () => {
    const config = loadText('trusted_proxies = ["127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"]\n[rate_limit]\nenabled = true\n[rate_limit.read]\nrequests = 5\nwindow_secs = 1');
    expect(config.trustedProxies).toEqual(PARSED);
    expect(config.rateLimit).toEqual({ enabled: true, classes: { read: { requests: 5, windowSecs: 1 } } });
  });

  it('still takes the older spelling under [rate_limit]', () => {
    expect(load('enabled = true\ntrusted_proxies = ["127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"]').trustedProxies).toEqual(PARSED);
  });

  it('refuses both spellings at once, naming the one to drop', () => {
    expect(() => loadText('trusted_proxies = ["10.0.0.0/8"]\n[rate_limit]\ntrusted_proxies = ["10.0.0.0/8"]')).toThrow(
      /rate_limit\.trusted_proxies: is given as well as the top-level trusted_proxies.*fix: keep only the top-level trusted_proxies/,
    );
  });

  it('defaults to none', () => {
    expect(load('enabled = true').trustedProxies).toEqual([]);
    expect(loadText('').trustedProxies).toEqual([]);
  });

  it('is shown by check-config, and a bad entry stops it naming the key', async () => {
    const dir = tempDir('velodex-rl-config-');
    const good = join(dir, 'good.toml');
    writeFileSync(good, 'trusted_proxies = ["10.0.0.0/8", "::1"]\n[rate_limit]\nenabled = true\n[rate_limit.read]\nrequests = 600\nwindow_secs = 60\n');
    const ok = await run(process.execPath, [CLI, 'check-config', good]);
    expect(ok.stdout).toContain('rate limit: read 600/60s\ntrusted proxies: 10.0.0.0/8, ::1/128\n');
    for (const [text, key] of [
      ['[rate_limit]\ntrusted_proxies = ["10.0.0.0/8", "proxy.internal"]\n', 'rate_limit\\.trusted_proxies\\[1\\]'],
      ['trusted_proxies = ["10.0.0.0/8", "proxy.internal"]\n', '^config: trusted_proxies\\[1\\]'],
    ] as const) {
      const bad = join(dir, 'bad.toml');
      writeFileSync(bad, text);
      const refused = await run(process.execPath, [CLI, 'check-config', bad], { allowFailure: true });
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(new RegExp(`${key}: "proxy\\.internal" is not an IP address or CIDR network.*fix:`, 'm'));
    }
  });

  it.each([
    ['localhost', /trusted_proxies\[0\]: "localhost" is not an IP address/],
    ['10.0.0.0/33', /trusted_proxies\[0\]: "10.0.0.0\/33" has a bad prefix length: IPv4 allows 0 to 32/],
    ['::1/129', /bad prefix length: IPv6 allows 0 to 128/],
    ['10.0.0.0/', /bad prefix length/],
    ['10.0.0.0/8/8', /bad prefix length/],
  ])('refuses %s', (entry, message) => {
    expect(() => load(`trusted_proxies = ["${entry}"]`)).toThrow(ConfigError);
    expect(() => load(`trusted_proxies = ["${entry}"]`)).toThrow(message);
    expect(() => loadText(`trusted_proxies = ["${entry}"]`)).toThrow(message);
  });
});

describe('[connections]', () => {
  it('has defaults a server that sets nothing runs with', () => {
    expect(loadText('').connections).toEqual({ headersTimeoutMs: 30_000, bodyIdleTimeoutMs: 60_000, keepAliveTimeoutMs: 75_000, maxPerClient: 0, drainMs: 1_000 });
  });

  it('takes every bound and the cap', () => {
    const config = loadText('[connections]\nheaders_timeout_secs = 5\nbody_idle_timeout_secs = 20\nkeep_alive_timeout_secs = 10\nmax_per_client = 64\ndrain_secs = 0');
    expect(config.connections).toEqual({ headersTimeoutMs: 5_000, bodyIdleTimeoutMs: 20_000, keepAliveTimeoutMs: 10_000, maxPerClient: 64, drainMs: 0 });
  });

  it.each([
    ['headers_timeout_secs = 0', /connections\.headers_timeout_secs/],
    ['body_idle_timeout_secs = 1.5', /connections\.body_idle_timeout_secs/],
    ['keep_alive_timeout_secs = -1', /connections\.keep_alive_timeout_secs/],
    ['max_per_client = -1', /connections\.max_per_client/],
    ['drain_secs = 61', /connections\.drain_secs/],
    ['drain_secs = 0.5', /connections\.drain_secs/],
    ['request_timeout_secs = 60', /connections: unknown key "request_timeout_secs"/],
  ])('refuses %s, naming the key', (line, message) => {
    expect(() => loadText(`[connections]\n${line}`)).toThrow(ConfigError);
    expect(() => loadText(`[connections]\n${line}`)).toThrow(message);
  });

  it('is shown by check-config', async () => {
    const file = join(tempDir('velodex-conn-config-'), 'velodex.toml');
    writeFileSync(file, '[connections]\nbody_idle_timeout_secs = 20\nmax_per_client = 64\n');
    expect((await run(process.execPath, [CLI, 'check-config', file])).stdout).toContain('connections: headers 30s, body idle 20s, keep-alive 75s, drain 1s, per client: at most 64 per process\n');
  });
});

describe('ConnectionCap', () => {
  it('admits up to the limit per address, and one more once one closed', () => {
    const cap = new ConnectionCap(2);
    expect([cap.take('198.51.100.1'), cap.take('198.51.100.1'), cap.take('198.51.100.1')]).toEqual([true, true, false]);
    // A refused connection was never counted: the address still holds two.
    expect(cap.held('198.51.100.1')).toBe(2);
    expect(cap.take('198.51.100.2')).toBe(true);
    cap.release('198.51.100.1');
    expect(cap.take('198.51.100.1')).toBe(true);
    cap.release('198.51.100.1');
    cap.release('198.51.100.1');
    expect(cap.held('198.51.100.1')).toBe(0);
    // Releasing more than was taken never goes below zero or lends a place to the next connection.
    cap.release('198.51.100.1');
    expect([cap.take('198.51.100.1'), cap.take('198.51.100.1'), cap.take('198.51.100.1')]).toEqual([true, true, false]);
  });
});

describe('classification', () => {
  it.each([
    ['GET', ['files', 'a'.repeat(64), 'x-1.0-py3-none-any.whl'], 'download'],
    ['HEAD', ['files', 'a'.repeat(64), 'x-1.0-py3-none-any.whl.metadata'], 'download'],
    ['GET', ['simple'], 'read'],
    ['GET', ['simple', 'alpha'], 'read'],
    ['GET', ['alpha', 'json'], 'read'],
    ['GET', ['+api'], 'read'],
    ['GET', ['inspect', 'a'.repeat(64), 'x.whl'], 'read'],
    ['POST', [], 'write'],
    ['PUT', ['alpha', '1.0', 'yank'], 'write'],
    ['DELETE', ['alpha'], 'write'],
  ] as const)('Python %s %j is %s', (method, rest, cls) => {
    expect(classifyPython(method, rest)).toBe(cls);
  });

  const digest = `sha256:${'b'.repeat(64)}`;
  it.each([
    ['GET', [], 'read'],
    ['GET', ['_catalog'], 'read'],
    ['GET', ['root', 'oci', 'app', 'manifests', 'latest'], 'read'],
    ['HEAD', ['root', 'oci', 'app', 'manifests', digest], 'read'],
    ['GET', ['root', 'oci', 'app', 'tags', 'list'], 'read'],
    ['GET', ['root', 'oci', 'app', 'referrers', digest], 'read'],
    ['GET', ['root', 'oci', 'app', 'blobs', digest, 'contents'], 'read'],
    ['GET', ['root', 'oci', 'app', 'blobs', digest], 'download'],
    ['HEAD', ['root', 'oci', 'app', 'blobs', digest], 'download'],
    ['GET', ['root', 'oci', 'app', 'blobs', 'uploads', 'session-id'], 'write'],
    ['POST', ['root', 'oci', 'app', 'blobs', 'uploads'], 'write'],
    ['PATCH', ['root', 'oci', 'app', 'blobs', 'uploads', 'session-id'], 'write'],
    ['PUT', ['root', 'oci', 'app', 'manifests', 'latest'], 'write'],
    ['DELETE', ['root', 'oci', 'app', 'blobs', digest], 'write'],
  ] as const)('OCI %s %j is %s', (method, segs, cls) => {
    expect(classifyOci(method, segs)).toBe(cls);
  });
});
