/** Which indexes a registry serves, and the reason each refused one shows in its status. */
import { describe, expect, it } from 'vitest';
import { planNamespace, type SecretsByName } from '../../operator/src/plan/plan.js';
import { API_VERSION, type PackageIndex, type PackageIndexSpec, type PackageRegistry } from '../../operator/src/resources/types.js';

const registry = (name: string, credentials = 's3'): PackageRegistry => ({
  apiVersion: API_VERSION,
  kind: 'PackageRegistry',
  metadata: { name, namespace: 'team' },
  spec: { storage: { endpoint: 'http://minio:9000', bucket: 'velodex', credentialsSecretRef: { name: credentials } } },
});

let clock = 0;
const index = (name: string, spec: PackageIndexSpec): PackageIndex => ({
  apiVersion: API_VERSION,
  kind: 'PackageIndex',
  metadata: { name, namespace: 'team', creationTimestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, clock++)).toISOString() },
  spec,
});

const secrets: SecretsByName = new Map<string, Record<string, string>>([
  ['s3', { 'access-key': 'a', 'secret-key': 's' }],
  ['tokens', { hosted: 't' }],
  ['hub-account', { username: 'u' }],
]);

describe('planNamespace', () => {
  it('serves valid indexes and names the reason for each one it refuses', () => {
    const hosted = index('hosted', { route: 'team/hosted', ecosystem: 'python', role: 'hosted', uploadTokenSecretRef: { name: 'tokens', key: 'hosted' } });
    const pypi = index('pypi', { route: 'team/pypi', ecosystem: 'python', role: 'cached', upstream: 'https://pypi.org/simple/' });
    const clash = index('clash', { route: 'team/hosted', ecosystem: 'python', role: 'cached', upstream: 'https://pypi.org/simple/' });
    const lost = index('lost', { registry: 'nope', route: 'team/lost', ecosystem: 'python', role: 'hosted' });
    const noKey = index('nokey', { route: 'team/nokey', ecosystem: 'python', role: 'hosted', uploadTokenSecretRef: { name: 'tokens', key: 'other' } });
    const images = index('images', { route: 'team/images', ecosystem: 'oci', role: 'hosted' });
    const mixed = index('mixed', { route: 'team/mixed', ecosystem: 'python', role: 'virtual', members: ['hosted', 'images'] });
    const viaBroken = index('via-broken', { route: 'team/via', ecosystem: 'python', role: 'virtual', members: ['hosted', 'nokey'] });
    // The Secret exists but lacks the default password key.
    const hub = index('hub', { route: 'hub', ecosystem: 'oci', role: 'cached', upstream: 'https://registry-1.docker.io', upstreamCredentialsSecretRef: { name: 'hub-account' } });
    const all = [viaBroken, mixed, images, noKey, lost, clash, pypi, hosted, hub];

    const plan = planNamespace([registry('default')], all, secrets);
    const served = plan.registries.get('default')?.served.map((ix) => ix.metadata.name);
    expect(served).toEqual(['hosted', 'images', 'pypi']);
    const reason = (name: string) => plan.refused.get(name);
    expect(reason('clash')).toEqual({ reason: 'RouteConflict', message: 'route "team/hosted" is already served by the older PackageIndex "hosted"' });
    expect(reason('lost')?.reason).toBe('RegistryNotFound');
    expect(reason('lost')?.message).toContain('PackageRegistry "nope" does not exist');
    expect(reason('nokey')).toEqual({ reason: 'SecretNotFound', message: 'spec.uploadTokenSecretRef: Secret "tokens" has no key "other"' });
    expect(reason('hub')).toEqual({ reason: 'SecretNotFound', message: 'spec.upstreamCredentialsSecretRef: Secret "hub-account" has no key "password"' });
    expect(reason('mixed')?.reason).toBe('InvalidSpec');
    expect(reason('mixed')?.message).toMatch(/^the registry refuses this index: .*index "mixed".*images/);
    expect(reason('via-broken')?.message).toContain('member "nokey" is not served (SecretNotFound');
    expect(plan.registries.get('default')?.config?.toml).not.toContain('clash');
  });

  it('refuses every index of a registry whose storage credentials are missing', () => {
    const hosted = index('h2', { route: 'x/h', ecosystem: 'python', role: 'hosted' });
    const plan = planNamespace([registry('default', 'absent')], [hosted], secrets);
    expect(plan.registries.get('default')?.config).toBeNull();
    expect(plan.refused.get('h2')?.reason).toBe('SecretNotFound');
    expect(plan.refused.get('h2')?.message).toContain('credentialsSecretRef: Secret "absent" does not exist');
  });
});
