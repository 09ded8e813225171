/**
 * Which index and repository a `/v2/` name addresses when the request names a registry (`ns`),
 * as a pure function (oci/handlers/mirror.ts): the one-endpoint form, the per-index route form
 * (also through a virtual index over the registry's cache), a registry's names never read from
 * another registry's cache, and `ns` ignored on index routes while nothing is mirrored.
 */
import { describe, expect, it } from 'vitest';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import type { Config } from '../../registry/src/config/types.js';
import { parseConfigText } from '../../registry/src/config/load.js';
import { ociFacts } from '../../registry/src/oci/facts.js';
import { resolveTarget } from '../../registry/src/oci/handlers/mirror.js';
import { OciError } from '../../registry/src/oci/model/errors.js';
import { namespaceOf } from '../../registry/src/oci/model/namespace.js';
import { mirrors, oci, toml, type ConfigPart } from '../support/config.js';

const INDEXES = [
  oci.cached('hub', 'https://registry-1.docker.io', { route: 'hub' }),
  oci.cached('quay', 'https://quay.io', { route: 'quay' }),
  oci.hosted('own', { route: 'own' }),
  oci.virtual('dev', ['own', 'hub'], { route: 'dev' }),
];

function resolverOf(...parts: ConfigPart[]) {
  const config: Config = parseConfigText(toml(...INDEXES, ...parts), 't', { ecosystems, env: {} });
  const deps = {
    ociIndexes: config.indexes,
    indexByName: new Map(config.indexes.map((ix) => [ix.name, ix])),
    mirrors: { byRegistry: new Map(config.mirrors.map((m) => [m.registry, m.index])), aliases: ociFacts.mirror?.aliases ?? {} },
  };
  return (ns: string | null, name: string): string => {
    try {
      const t = resolveTarget(deps, namespaceOf(new URLSearchParams(ns === null ? '' : `ns=${ns}`), deps.mirrors.aliases), name.split('/'));
      return `${t.index.name}:${t.repo.join('/')}`;
    } catch (err) {
      if (err instanceof OciError) return `${err.status} ${err.code}`;
      throw err;
    }
  };
}

describe('resolveTarget', () => {
  const mirrored = resolverOf(mirrors([{ registry: 'docker.io', index: 'hub' }]));

  it.each([
    ['docker.io', 'library/alpine', 'hub:library/alpine'],
    ['registry-1.docker.io', 'library/alpine', 'hub:library/alpine'],
    // The per-index route form of the mapped index, and of a virtual index over it.
    ['docker.io', 'hub/library/alpine', 'hub:library/alpine'],
    ['docker.io', 'dev/library/alpine', 'dev:library/alpine'],
    // Under the route of another registry's cache: a Docker Hub repository named quay/...
    ['docker.io', 'quay/org/app', 'hub:quay/org/app'],
    // An unmapped registry: its own cache's route form only.
    ['quay.io', 'quay/org/app', 'quay:org/app'],
    ['quay.io', 'hub/library/alpine', '404 NAME_UNKNOWN'],
    ['quay.io', 'own/app', '404 NAME_UNKNOWN'],
    ['quay.io', 'org/app', '404 NAME_UNKNOWN'],
    ['not%20a%20host', 'own/app', '404 NAME_UNKNOWN'],
    [null, 'hub/library/alpine', 'hub:library/alpine'],
    [null, 'library/alpine', '404 NAME_UNKNOWN'],
    ['docker.io', 'Library/alpine', '400 NAME_INVALID'],
  ])('ns=%s %s → %s', (ns, name, expected) => {
    expect(mirrored(ns, name)).toBe(expected);
  });

  it('ignores ns on index routes while nothing is mirrored, as before [[mirror]]', () => {
    const plain = resolverOf();
    expect(plain('quay.io', 'own/app')).toBe('own:app');
    expect(plain('docker.io', 'quay/org/app')).toBe('quay:org/app');
    expect(plain('docker.io', 'library/alpine')).toBe('404 NAME_UNKNOWN');
  });
});
