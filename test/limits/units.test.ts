/**
 * The pure parts around the limiter: `trusted_proxies` is validated at load with an error naming
 * the entry, and each ecosystem classes its requests from method and path segments alone.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../registry/src/config/errors.js';
import { parseConfigText } from '../../registry/src/config/load.js';
import { ecosystems } from '../../registry/src/ecosystems.js';
import { classifyOci } from '../../registry/src/oci/classify.js';
import { classifyPython } from '../../registry/src/python/classify.js';
import { CLI } from '../support/paths.js';
import { run } from '../support/run.js';
import { tempDir } from '../support/velodex.js';

const load = (rateLimit: string) => parseConfigText(`[rate_limit]\n${rateLimit}\n`, 'test.toml', { ecosystems, env: {} });

describe('[rate_limit] trusted_proxies', () => {
  it('takes IPv4 and IPv6 addresses and networks', () => {
    const config = load('enabled = true\ntrusted_proxies = ["127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"]\n[rate_limit.read]\nrequests = 5\nwindow_secs = 1');
    expect(config.rateLimit).toEqual({
      enabled: true,
      classes: { read: { requests: 5, windowSecs: 1 } },
      trustedProxies: [
        { address: '127.0.0.1', prefix: 32, family: 'ipv4' },
        { address: '10.0.0.0', prefix: 8, family: 'ipv4' },
        { address: '::1', prefix: 128, family: 'ipv6' },
        { address: 'fd00::', prefix: 8, family: 'ipv6' },
      ],
    });
  });

  it('defaults to none', () => {
    expect(load('enabled = true').rateLimit.trustedProxies).toEqual([]);
  });

  it('is shown by check-config, and a bad entry stops it naming the key', async () => {
    const dir = tempDir('velodex-rl-config-');
    const good = join(dir, 'good.toml');
    writeFileSync(good, '[rate_limit]\nenabled = true\ntrusted_proxies = ["10.0.0.0/8", "::1"]\n[rate_limit.read]\nrequests = 600\nwindow_secs = 60\n');
    const ok = await run(process.execPath, [CLI, 'check-config', good]);
    expect(ok.stdout).toContain('rate limit: read 600/60s; trusted proxies: 10.0.0.0/8, ::1/128');
    const bad = join(dir, 'bad.toml');
    writeFileSync(bad, '[rate_limit]\ntrusted_proxies = ["10.0.0.0/8", "proxy.internal"]\n');
    const refused = await run(process.execPath, [CLI, 'check-config', bad], { allowFailure: true });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/rate_limit\.trusted_proxies\[1\]: "proxy\.internal" is not an IP address or CIDR network.*fix:/);
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
