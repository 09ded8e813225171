/**
 * `[[mirror]]`: registry hosts in one spelling (lower case, Docker Hub's API hosts folded into
 * `docker.io`), each mapped to an index that exists and is a cached OCI index; no registry twice,
 * no index for two registries; every refusal names the entry and the key.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { ConfigError } from '../../registry/src/config/errors.js';
import { parseConfigText } from '../../registry/src/config/load.js';
import { registryHost } from '../../registry/src/config/mirrors.js';
import { cached, hosted, mirrors, oci, toml, type ConfigPart } from '../support/config.js';
import { CLI } from '../support/paths.js';
import { run } from '../support/run.js';
import { tempDir } from '../support/temp-dirs.js';

const INDEXES = [
  oci.cached('hub', 'https://registry-1.docker.io'),
  oci.cached('ghcr', 'https://ghcr.io'),
  oci.hosted('own'),
  cached('pypi', 'https://pypi.org/simple/'),
];
const load = (...parts: ConfigPart[]) => parseConfigText(toml(...INDEXES, ...parts), 'test.toml', { ecosystems, env: {} });

function refusal(...parts: ConfigPart[]): ConfigError {
  try {
    load(...parts);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('the config loaded');
}

describe('[[mirror]]', () => {
  it('is empty without entries', () => {
    expect(load().mirrors).toEqual([]);
  });

  it('maps each registry, in its one spelling, to its cached index', () => {
    const config = load(mirrors([{ registry: 'Registry-1.Docker.IO', index: 'hub' }, { registry: 'ghcr.io', index: 'ghcr' }]));
    expect(config.mirrors.map((m) => [m.registry, m.index.name, m.index.role])).toEqual([
      ['docker.io', 'hub', 'cached'],
      ['ghcr.io', 'ghcr', 'cached'],
    ]);
  });

  it.each([
    [[{ registry: 'docker.io', index: 'nope' }], 'mirror[0].index', /"nope" is not a configured index/],
    [[{ registry: 'docker.io', index: 'own' }], 'mirror[0].index', /"own" is a hosted index, not a cached one/],
    [[{ registry: 'pypi.org', index: 'pypi' }], 'mirror[0].index', /"pypi" is a python index; only oci indexes serve registries by host/],
    [[{ registry: 'https://docker.io', index: 'hub' }], 'mirror[0].registry', /"https:\/\/docker.io" is not a registry host/],
    [[{ registry: 'docker.io/library', index: 'hub' }], 'mirror[0].registry', /is not a registry host/],
    [[{ registry: 'quay.io:0', index: 'hub' }], 'mirror[0].registry', /is not a registry host/],
    [[{ registry: 'docker.io', index: 'hub' }, { registry: 'index.docker.io', index: 'ghcr' }], 'mirror[1].registry', /"docker.io" is also the registry of mirror\[0\] \("index.docker.io" is the same registry\)/],
    [[{ registry: 'docker.io', index: 'hub' }, { registry: 'quay.io', index: 'hub' }], 'mirror[1].index', /"hub" already serves registry "docker.io"/],
  ])('refuses %j, naming %s', (entries, where, problem) => {
    const err = refusal(mirrors(entries));
    expect(err.where).toBe(where);
    expect(err.problem).toMatch(problem);
    expect(err.fix).toBeTruthy();
  });

  it('is what check-config prints', async () => {
    const path = join(tempDir('velodex-mirror-config-'), 'velodex.toml');
    writeFileSync(path, toml(...INDEXES, mirrors([{ registry: 'docker.io', index: 'hub' }, { registry: 'ghcr.io', index: 'ghcr' }])));
    expect((await run(process.execPath, [CLI, 'check-config', path])).stdout).toContain('\nmirror: docker.io -> hub, ghcr.io -> ghcr\n');
  });

  it('refuses an unknown key of an entry', () => {
    expect(() => parseConfigText(`${toml(...INDEXES)}\n[[mirror]]\nregistry = "docker.io"\nindex = "hub"\nserver = "x"\n`, 't', { ecosystems, env: {} })).toThrow(/mirror\.0: unknown key "server"/);
  });

  it('takes a private cached index: its read rule applies to the mirror', () => {
    const config = parseConfigText(toml(oci.cached('hub', 'https://registry-1.docker.io', { read: 'token', tokens: [{ name: 'r', secret: 's-1', scopes: ['read'] }] }), hosted('h'), mirrors([{ registry: 'docker.io', index: 'hub' }])), 't', { ecosystems, env: {} });
    expect(config.mirrors[0]?.index.private).toBe(true);
  });
});

describe('registryHost', () => {
  it.each([
    ['docker.io', 'docker.io'],
    ['GHCR.IO', 'ghcr.io'],
    ['127.0.0.1:5000', '127.0.0.1:5000'],
    ['10.0.0.5:05000', '10.0.0.5:5000'],
    ['[::1]:5000', '[::1]:5000'],
    ['my-registry.local', 'my-registry.local'],
    ['kind_registry:5000', 'kind_registry:5000'],
    ['', null],
    ['docker.io:', null],
    ['docker.io:70000', null],
    ['1.2.3', null],
    ['-a.io', null],
    ['a..io', null],
    ['::1', null],
    ['[zz]', null],
    ['docker.io/library', null],
    ['a b', null],
  ])('%j is %j', (raw, host) => {
    expect(registryHost(raw)).toBe(host);
  });
});
