/**
 * The config builders the suites start servers with write what they say: the loader reads each
 * option back as the setting it names, strings survive any character, and two parts that set
 * the same table are refused rather than merged.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../registry/src/config/load.js';
import type { CachedIndex, HostedIndex, VirtualIndex } from '../../registry/src/config/types.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { defaultIndexes } from './backend.js';
import { admin, auth, cached, connections, hosted, metrics, oci, rateLimit, s3Storage, toml, trustedProxies, virtual } from './config.js';
import { tempDir } from './temp-dirs.js';

const load = (text: string, env: Record<string, string> = {}) => parseConfigText(text, 'builders.toml', { ecosystems, env });

describe('index builders', () => {
  it('write each role with its options, routes under root/ unless given', () => {
    const dir = tempDir('velodex-builders-');
    writeFileSync(join(dir, 'password'), 'pw-from-file\n');
    const config = load(
      toml(
        hosted('hosted', { token: 'tok', volatile: true, policy: { denyProjects: ['evil-*'], maxFileSize: 1000, minReleaseAge: '1d' } }),
        hosted('locked', { route: 'team/locked', webhooks: [{ url: 'http://127.0.0.1:9/hook', secret: { env: 'HOOK_SECRET' }, events: ['upload'] }] }),
        cached('pypi', 'https://pypi.example/simple/', {
          ttlSecs: 0,
          upstreamConcurrency: 2,
          upstreamHosts: ['files.example'],
          credentials: { username: { env: 'UP_USER' }, password: { file: join(dir, 'password') } },
        }),
        virtual('dev', ['hosted', 'pypi'], { uploadTarget: 'hosted' }),
        oci.hosted('images', { token: { env: 'OCI_TOKEN' } }),
        oci.cached('hub', 'https://registry.example'),
        oci.virtual('all', ['images', 'hub'], { route: 'all' }),
      ),
      { HOOK_SECRET: 'hook-secret', UP_USER: 'up-user', OCI_TOKEN: 'oci-token' },
    );
    expect(config.indexes.map((i) => [i.name, i.route, i.ecosystem, i.role])).toEqual([
      ['hosted', 'root/hosted', 'python', 'hosted'],
      ['locked', 'team/locked', 'python', 'hosted'],
      ['pypi', 'root/pypi', 'python', 'cached'],
      ['dev', 'root/dev', 'python', 'virtual'],
      ['images', 'root/images', 'oci', 'hosted'],
      ['hub', 'root/hub', 'oci', 'cached'],
      ['all', 'all', 'oci', 'virtual'],
    ]);
    const [h, locked, pypi, dev, images] = config.indexes as [HostedIndex, HostedIndex, CachedIndex, VirtualIndex, HostedIndex];
    expect([h.uploadToken?.reveal(), h.volatile, h.policy]).toEqual(['tok', true, { denyProjects: ['evil-*'], allowProjects: [], maxFileSize: 1000, minReleaseAgeSecs: 86_400 }]);
    expect([locked.uploadToken, locked.volatile]).toEqual([undefined, false]);
    expect(locked.webhooks.map((w) => [w.url, w.secret?.reveal(), w.events])).toEqual([['http://127.0.0.1:9/hook', 'hook-secret', ['upload']]]);
    expect([pypi.upstreams[0].url, pypi.cacheTtlSecs, pypi.upstreamConcurrency, pypi.upstreams[0].hosts]).toEqual(['https://pypi.example/simple/', 0, 2, ['files.example']]);
    expect([pypi.upstreams[0].username?.reveal(), pypi.upstreams[0].password?.reveal()]).toEqual(['up-user', 'pw-from-file']);
    expect([dev.members, dev.uploadTarget]).toEqual([['hosted', 'pypi'], 'hosted']);
    expect(images.uploadToken?.source).toBe('env:OCI_TOKEN');
  });

  it('write nothing for an option not given', () => {
    expect(parse(toml(hosted('h'), cached('c', 'https://pypi.example/simple/'), virtual('v', ['h'])))).toEqual({
      index: [
        { name: 'h', route: 'root/h', hosted: true },
        { name: 'c', route: 'root/c', cached: 'https://pypi.example/simple/' },
        { name: 'v', route: 'root/v', members: ['h'] },
      ],
    });
  });

  it('quote every string, whatever it holds', () => {
    const token = 'a"b\\c\nd\'e #f';
    const config = load(toml(hosted('h', { token })));
    expect((config.indexes[0] as HostedIndex).uploadToken?.reveal()).toBe(token);
  });

  it('write the embedded default as the file it stands for', () => {
    const config = load(toml(defaultIndexes(tempDir('velodex-builders-'), { VELODEX_UPLOAD_TOKEN: 'default-token' })), { VELODEX_UPLOAD_TOKEN: 'default-token' });
    expect(config.indexes.map((i) => [i.route, i.ecosystem, i.role])).toEqual([
      ['root/hosted', 'python', 'hosted'],
      ['root/oci', 'oci', 'hosted'],
    ]);
  });
});

describe('top-level builders', () => {
  it('write each table and key', () => {
    const config = load(
      toml(
        hosted('h'),
        trustedProxies(['127.0.0.1']),
        rateLimit({ enabled: true, read: { requests: 4, windowSecs: 2 }, admin: { requests: 1, windowSecs: 60 } }),
        connections({ headersTimeoutSecs: 1, bodyIdleTimeoutSecs: 2, keepAliveTimeoutSecs: 3, maxPerClient: 4, drainSecs: 5 }),
        admin({ env: 'ADMIN_TOKEN' }),
        auth({ tokenSigningKey: 'k'.repeat(40) }),
        metrics({ enabled: false }),
        s3Storage(
          { endpoint: 'http://127.0.0.1:9000', bucket: 'b', accessKey: 'ak', secretKey: 'sk' },
          { prefix: 'p', endpoint: 'http://127.0.0.1:9001', redirect: { minSize: 10, ttlSecs: 60, endpoint: 'http://127.0.0.1:9002' } },
        ),
      ),
      { ADMIN_TOKEN: 'admin-token' },
    );
    expect(config.trustedProxies).toEqual([{ address: '127.0.0.1', prefix: 32, family: 'ipv4' }]);
    expect(config.rateLimit).toEqual({ enabled: true, classes: { read: { requests: 4, windowSecs: 2 }, admin: { requests: 1, windowSecs: 60 } } });
    expect(config.connections).toEqual({ headersTimeoutMs: 1_000, bodyIdleTimeoutMs: 2_000, keepAliveTimeoutMs: 3_000, maxPerClient: 4, drainMs: 5_000 });
    expect(config.admin.token?.reveal()).toBe('admin-token');
    expect(config.auth.tokenSigningKey?.reveal()).toBe('k'.repeat(40));
    expect(config.metrics).toEqual({ enabled: false });
    const s = config.storage;
    expect([s.backend, s.endpoint, s.bucket, s.prefix, s.accessKey?.reveal(), s.secretKey?.reveal(), s.redirect]).toEqual([
      's3',
      'http://127.0.0.1:9001',
      'b',
      'p',
      'ak',
      'sk',
      { minSize: 10, ttlSecs: 60, endpoint: 'http://127.0.0.1:9002' },
    ]);
  });

  it('refuse two parts that set one table', () => {
    expect(() => toml(admin('a'), admin('b'))).toThrow(/"admin" is set by two parts/);
  });
});
