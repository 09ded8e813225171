/**
 * Which registries a watch event concerns (reconcile/keys.ts): an index its registry (and the one
 * it left), a labelled Secret every registry that it or one of its indexes references, a pod its
 * own registry; nothing else is reconciled for it.
 */
import type { V1Pod, V1Secret } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ClusterView } from '../../operator/src/kube/informers.js';
import { EventKeys, registryKey, splitKey } from '../../operator/src/reconcile/keys.js';
import { API_VERSION, type PackageIndex, type PackageIndexSpec, type PackageRegistry } from '../../operator/src/resources/types.js';

const registry = (namespace: string, name: string, credentials = 's3'): PackageRegistry => ({
  apiVersion: API_VERSION,
  kind: 'PackageRegistry',
  metadata: { name, namespace },
  spec: { storage: { endpoint: 'http://minio:9000', bucket: 'velodex', credentialsSecretRef: { name: credentials } } },
});
const index = (namespace: string, name: string, spec: Partial<PackageIndexSpec> = {}): PackageIndex => ({
  apiVersion: API_VERSION,
  kind: 'PackageIndex',
  metadata: { name, namespace },
  spec: { route: `x/${name}`, ecosystem: 'python', role: 'hosted', ...spec },
});
const secret = (namespace: string, name: string): V1Secret => ({ metadata: { namespace, name } });
const pod = (namespace: string, instance: string): V1Pod => ({ metadata: { namespace, name: `${instance}-1`, labels: { 'app.kubernetes.io/name': 'velodex', 'app.kubernetes.io/instance': instance } } });

/** A view over plain lists (what the informers' caches hold), changed in place by the tests. */
function view(registries: PackageRegistry[], indexes: PackageIndex[]): Pick<ClusterView, 'registries' | 'indexes'> {
  return {
    registries: (ns) => registries.filter((r) => ns === undefined || r.metadata.namespace === ns),
    indexes: (ns) => indexes.filter((ix) => ns === undefined || ix.metadata.namespace === ns),
  };
}

describe('EventKeys', () => {
  const registries = [registry('team', 'default'), registry('team', 'other', 'other-s3'), registry('lab', 'default')];
  const hosted = index('team', 'hosted', { uploadTokenSecretRef: { name: 'tokens', key: 'hosted' } });
  const hook = index('team', 'hook', { registry: 'other', webhooks: [{ urlSecretRef: { name: 'hooks', key: 'chat' }, secretRef: { name: 'tokens', key: 'signing' } }] });
  const cache = index('team', 'hub', { role: 'cached', upstream: 'https://registry-1.docker.io', ecosystem: 'oci', upstreamCredentialsSecretRef: { name: 'hub-account' } });
  const lost = index('team', 'lost', { registry: 'nowhere' });
  const ci = index('team', 'ci', { registry: 'other', tokens: [{ name: 'ci-release', secretRef: { name: 'ci-tokens', key: 'release' }, scopes: ['upload'] }] });
  const indexes = [hosted, hook, cache, lost, ci];

  it('keys every registry, and the registry of every index (one that does not exist too: its indexes are told so)', () => {
    const keys = new EventKeys(view(registries, indexes));
    expect([...keys.all()].sort()).toEqual(['lab/default', 'team/default', 'team/nowhere', 'team/other']);
    expect(splitKey(registryKey('team', 'default'))).toEqual({ namespace: 'team', name: 'default' });
  });

  it('maps a registry to itself and an index to its registry, and to the one it left when spec.registry changes', () => {
    const keys = new EventKeys(view(registries, indexes));
    keys.all();
    expect(keys.of({ kind: 'PackageRegistry', verb: 'update', object: registries[1]! })).toEqual(['team/other']);
    expect(keys.of({ kind: 'PackageIndex', verb: 'update', object: hosted })).toEqual(['team/default']);
    const moved = index('team', 'hosted', { registry: 'other' });
    expect(keys.of({ kind: 'PackageIndex', verb: 'update', object: moved })).toEqual(['team/other', 'team/default']);
    expect(keys.of({ kind: 'PackageIndex', verb: 'update', object: moved })).toEqual(['team/other']);
    expect(keys.of({ kind: 'PackageIndex', verb: 'delete', object: moved })).toEqual(['team/other']);
    // A new index of the same name starts afresh.
    expect(keys.of({ kind: 'PackageIndex', verb: 'add', object: hosted })).toEqual(['team/default']);
  });

  it('maps a Secret to the registries that reference it, through their storage or their indexes, in its namespace only', () => {
    const keys = new EventKeys(view(registries, indexes));
    const of = (s: V1Secret) => keys.of({ kind: 'Secret', verb: 'update', object: s }).sort();
    expect(of(secret('team', 'tokens'))).toEqual(['team/default', 'team/other']);
    expect(of(secret('team', 'hooks'))).toEqual(['team/other']);
    expect(of(secret('team', 'hub-account'))).toEqual(['team/default']);
    // A named token's Secret, like the upload token's: rotating it rolls the pods of its registry.
    expect(of(secret('team', 'ci-tokens'))).toEqual(['team/other']);
    expect(of(secret('team', 's3'))).toEqual(['team/default']);
    expect(of(secret('team', 'other-s3'))).toEqual(['team/other']);
    expect(of(secret('lab', 's3'))).toEqual(['lab/default']);
    expect(of(secret('lab', 'tokens'))).toEqual([]);
    expect(of(secret('team', 'unrelated'))).toEqual([]);
  });

  it("maps a pod to its registry, and nothing when that registry does not exist (the chart's own pods, a deleted registry's)", () => {
    const keys = new EventKeys(view(registries, indexes));
    expect(keys.of({ kind: 'Pod', verb: 'update', object: pod('team', 'other') })).toEqual(['team/other']);
    expect(keys.of({ kind: 'Pod', verb: 'delete', object: pod('team', 'velodex') })).toEqual([]);
    expect(keys.of({ kind: 'Pod', verb: 'add', object: { metadata: { namespace: 'team', name: 'x' } } })).toEqual([]);
  });
});
