/** Which indexes a registry serves, and the reason each refused one shows in its status. */
import { describe, expect, it } from 'vitest';
import { checkConfigText, ConfigError } from '../../registry/src/app/config-check.js';
import { isPending, planNamespace, type PlanInput, type SecretsByName } from '../../operator/src/plan/plan.js';
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
  ['hook-urls', { chat: 'https://hooks.chat.example/services/T1/B2/key' }],
]);

const DEFAULT_IMAGE = 'docker.io/velodex/velodex:0.1.0';
/** Labelled Secrets as above; "kube-admin" and "s3-unlabelled" exist without the label. */
const input = (over: Partial<PlanInput> = {}): PlanInput => ({
  secrets,
  notOptedIn: new Set(['kube-admin', 's3-unlabelled']),
  images: { defaultImage: DEFAULT_IMAGE, allowed: [] },
  ...over,
});

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

    const plan = planNamespace([registry('default')], all, input());
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
    const plan = planNamespace([registry('default', 'absent')], [hosted], input());
    expect(plan.registries.get('default')?.config).toBeNull();
    expect(plan.refused.get('h2')?.reason).toBe('SecretNotFound');
    expect(plan.refused.get('h2')?.message).toContain('credentialsSecretRef: Secret "absent" does not exist');
  });

  it('refuses an index naming a Secret that has not opted in, saying which label to add and why; nothing of it is rendered', () => {
    const thief = index('thief', {
      route: 'team/thief',
      ecosystem: 'python',
      role: 'cached',
      upstream: 'https://attacker.example/simple/',
      upstreamCredentialsSecretRef: { name: 'kube-admin', usernameKey: 'user', passwordKey: 'token' },
    });
    const hook = index('hook', { route: 'team/hook', ecosystem: 'python', role: 'hosted', webhooks: [{ url: 'https://attacker.example/h', secretRef: { name: 'kube-admin', key: 'token' } }] });
    const fine = index('fine', { route: 'team/fine', ecosystem: 'python', role: 'hosted', uploadTokenSecretRef: { name: 'tokens', key: 'hosted' } });
    const plan = planNamespace([registry('default')], [thief, hook, fine], input());
    expect(plan.refused.get('thief')).toEqual({
      reason: 'SecretNotOptedIn',
      message:
        'spec.upstreamCredentialsSecretRef: Secret "kube-admin" is not labelled velodex.dev/allow-reference=true, and velodex uses only Secrets that opt in ' +
        '(so that a resource cannot send just any Secret of the namespace to a server it names); if this Secret is meant for velodex: ' +
        'kubectl label secret kube-admin -n team velodex.dev/allow-reference=true',
    });
    expect(plan.refused.get('hook')).toMatchObject({ reason: 'SecretNotOptedIn', message: expect.stringMatching(/^spec\.webhooks\[0\]\.secretRef: Secret "kube-admin" is not labelled/) as unknown });
    const rp = plan.registries.get('default');
    expect(rp?.served.map((ix) => ix.metadata.name)).toEqual(['fine']);
    expect(rp?.config?.secrets).toEqual(['s3', 'tokens']);
    expect(rp?.config?.toml).not.toContain('kube-admin');
    // A Secret that exists nowhere is still SecretNotFound.
    const ghost = index('ghost', { route: 'team/ghost', ecosystem: 'python', role: 'hosted', uploadTokenSecretRef: { name: 'ghost', key: 'k' } });
    expect(planNamespace([registry('default')], [ghost], input()).refused.get('ghost')?.reason).toBe('SecretNotFound');
  });

  it('refuses every index of a registry whose storage Secret has not opted in', () => {
    const hosted = index('h3', { route: 'x/h3', ecosystem: 'python', role: 'hosted' });
    const plan = planNamespace([registry('default', 's3-unlabelled')], [hosted], input());
    expect(plan.registries.get('default')?.config).toBeNull();
    expect(plan.registries.get('default')?.refusal?.reason).toBe('SecretNotOptedIn');
    expect(plan.refused.get('h3')?.message).toContain('kubectl label secret s3-unlabelled -n team velodex.dev/allow-reference=true');
  });

  it('serves a registry with spec.tls only once its certificate Secret exists, has both keys and has opted in', () => {
    const hosted = index('h5', { route: 'x/h5', ecosystem: 'python', role: 'hosted' });
    const secure = { ...registry('default'), spec: { ...registry('default').spec, tls: { secretName: 'cert' } } };
    const plan = (cert?: Record<string, string>, notOptedIn: string[] = []) =>
      planNamespace([secure], [hosted], input({ secrets: new Map([...secrets, ...(cert ? [['cert', cert] as const] : [])]), notOptedIn: new Set(notOptedIn) })).registries.get('default');
    expect(plan()?.refusal).toEqual({ reason: 'SecretNotFound', message: 'PackageRegistry "default" spec.tls.secretName: Secret "cert" does not exist in this namespace' });
    expect(plan({ 'tls.crt': 'c' })?.refusal).toEqual({ reason: 'SecretNotFound', message: 'PackageRegistry "default" spec.tls.secretName: Secret "cert" has no key "tls.key"' });
    expect(plan(undefined, ['cert'])?.refusal?.reason).toBe('SecretNotOptedIn');
    const served = plan({ 'tls.crt': 'c', 'tls.key': 'k' });
    expect(served?.refusal).toBeUndefined();
    expect(served?.config?.toml).toContain('cert_file = "/etc/velodex/tls/tls.crt"');
    // With a Certificate the operator requests, a missing Secret is a wait (kstatus Reconciling),
    // naming who fills it; a Secret that exists but lacks a key or the label is still refused.
    const issued = { ...secure, spec: { ...secure.spec, tls: { secretName: 'cert', certManager: { issuerRef: { name: 'corp-ca' } } } } };
    const planIssued = (cert?: Record<string, string>, notOptedIn: string[] = []) =>
      planNamespace([issued], [hosted], input({ secrets: new Map([...secrets, ...(cert ? [['cert', cert] as const] : [])]), notOptedIn: new Set(notOptedIn) }));
    const waiting = planIssued();
    expect(waiting.registries.get('default')?.refusal).toEqual({
      reason: 'CertificatePending',
      message: 'PackageRegistry "default" spec.tls.secretName: Secret "cert" does not exist yet; cert-manager writes it once it has issued Certificate "default" (the registry\'s Certificate condition says how that goes)',
    });
    expect(isPending(waiting.refused.get('h5') ?? { reason: 'InvalidSpec', message: '' })).toBe(true);
    expect(planIssued({ 'tls.crt': 'c' }).registries.get('default')?.refusal?.reason).toBe('SecretNotFound');
    expect(planIssued(undefined, ['cert']).registries.get('default')?.refusal?.reason).toBe('SecretNotOptedIn');
    expect(planIssued({ 'tls.crt': 'c', 'tls.key': 'k' }).registries.get('default')?.refusal).toBeUndefined();
  });

  it('refuses a registry with both peerCache and readCacheMs (a CRD older than its rule lets them through) with the check\'s advice, and serves either alone', () => {
    const hosted = index('h6', { route: 'x/h6', ecosystem: 'python', role: 'hosted' });
    const withStorage = (over: Partial<PackageRegistry['spec']['storage']>): PackageRegistry => ({ ...registry('default'), spec: { storage: { ...registry('default').spec.storage, ...over } } });
    const plan = planNamespace([withStorage({ peerCache: true, readCacheMs: 2000 })], [hosted], input());
    expect(plan.registries.get('default')?.config).toBeNull();
    expect(plan.refused.get('h6')).toMatchObject({ reason: 'InvalidSpec', message: expect.stringContaining('cannot be combined with read_cache_ms') as unknown });
    for (const over of [{ peerCache: true }, { readCacheMs: 2000 }, { peerCache: true, readCacheMs: 0 }, { peerCache: false, readCacheMs: 2000 }]) {
      expect(planNamespace([withStorage(over)], [hosted], input()).registries.get('default')?.refusal, JSON.stringify(over)).toBeUndefined();
    }
  });

  it("runs only the platform's images: the default, or one matching an allowed pattern", () => {
    const hosted = index('h4', { route: 'x/h4', ecosystem: 'python', role: 'hosted' });
    const withImage = (image?: string): PackageRegistry => ({ ...registry('default'), spec: { ...registry('default').spec, ...(image ? { image } : {}) } });
    const allowed = ['ghcr.io/acme/velodex:*', 'registry.example/velodex@sha256:*'];
    const refusal = (image: string | undefined, patterns: string[] = allowed) =>
      planNamespace([withImage(image)], [hosted], input({ images: { defaultImage: DEFAULT_IMAGE, allowed: patterns } })).registries.get('default')?.refusal;
    for (const ok of [undefined, DEFAULT_IMAGE, 'ghcr.io/acme/velodex:1.2.3', 'registry.example/velodex@sha256:0123abcd']) expect(refusal(ok), ok).toBeUndefined();
    for (const bad of ['ghcr.io/acme/velodex-evil:1', 'ghcr.io/acme/velodex/x:1', 'evil.example/ghcr.io/acme/velodex:1', 'ghcr.io/acme/velodex', 'docker.io/velodex/velodex:latest']) {
      expect(refusal(bad), bad).toMatchObject({ reason: 'ImageNotAllowed' });
    }
    // No pattern: the default image only.
    expect(refusal('ghcr.io/acme/velodex:1.2.3', [])).toEqual({
      reason: 'ImageNotAllowed',
      message:
        `spec.image "ghcr.io/acme/velodex:1.2.3" is not an image this platform lets a registry run (besides the default ${DEFAULT_IMAGE}, no other image is allowed): ` +
        'remove spec.image to run the default, or ask the platform team to add the image to the chart value registry.allowedImages',
    });
    const plan = planNamespace([withImage('evil.example/x:1')], [hosted], input());
    expect(plan.registries.get('default')?.config).toBeNull();
    expect(plan.refused.get('h4')?.reason).toBe('ImageNotAllowed');
  });

  it("refuses an index whose named token's Secret or key is missing or not opted in, naming the token, as for the upload token", () => {
    const token = (name: string, secret: string, key: string) => ({ name, secretRef: { name: secret, key }, scopes: ['upload' as const] });
    const noKey = index('tok-nokey', { route: 'team/tok-nokey', ecosystem: 'python', role: 'hosted', tokens: [token('ci-release', 'tokens', 'release')] });
    const noSecret = index('tok-absent', { route: 'team/tok-absent', ecosystem: 'python', role: 'hosted', tokens: [token('reader', 'tokens', 'hosted'), token('ci', 'absent', 'token')] });
    const borrowed = index('tok-borrow', { route: 'team/tok-borrow', ecosystem: 'python', role: 'hosted', tokens: [token('ci', 'kube-admin', 'token')] });
    const plan = planNamespace([registry('default')], [noKey, noSecret, borrowed], input());
    expect(plan.refused.get('tok-nokey')).toEqual({ reason: 'SecretNotFound', message: 'spec.tokens[ci-release].secretRef: Secret "tokens" has no key "release"' });
    expect(plan.refused.get('tok-absent')).toEqual({ reason: 'SecretNotFound', message: 'spec.tokens[ci].secretRef: Secret "absent" does not exist in this namespace' });
    expect(plan.refused.get('tok-borrow')).toMatchObject({ reason: 'SecretNotOptedIn', message: expect.stringMatching(/^spec\.tokens\[ci\]\.secretRef: Secret "kube-admin" is not labelled/) as unknown });
    expect(plan.registries.get('default')?.served).toEqual([]);
  });

  // Needs the registry side of issue 27 ([[index.token]] in its config schema).
  it("serves an index with named tokens, mounting each token's Secret", () => {
    const team = index('tok-team', {
      route: 'team/tok-team',
      ecosystem: 'python',
      role: 'hosted',
      tokens: [{ name: 'ci-release', secretRef: { name: 'tokens', key: 'hosted' }, scopes: ['upload', 'delete'], projects: ['team-*'], expires: '2027-06-30' }],
    });
    const plan = planNamespace([registry('default')], [team], input());
    expect(plan.refused.get('tok-team')).toBeUndefined();
    const rp = plan.registries.get('default');
    expect(rp?.served.map((ix) => ix.metadata.name)).toEqual(['tok-team']);
    expect(rp?.config?.secrets).toEqual(['s3', 'tokens']);
    expect(rp?.config?.toml).toContain('secret_file = "/var/run/velodex/secrets/tokens/hosted"');
  });

  it('serves an index with ServiceAccount rules (no Secret involved), and refuses two rules for one ServiceAccount or a write rule on a virtual index', () => {
    const builds = index('sa-builds', { route: 'team/sa-builds', ecosystem: 'oci', role: 'hosted', access: { serviceAccounts: [{ name: 'builder', scopes: ['upload'] }, { namespace: 'ci', name: '*', scopes: ['read'] }] } });
    // The namespace defaults to the index's own ("team"): these two name the same ServiceAccount.
    const twice = index('sa-twice', { route: 'team/sa-twice', ecosystem: 'python', role: 'hosted', access: { serviceAccounts: [{ name: 'builder', scopes: ['read'] }, { namespace: 'team', name: 'builder', scopes: ['upload'] }] } });
    const view = index('sa-view', { route: 'team/sa-view', ecosystem: 'oci', role: 'virtual', members: ['sa-builds'], access: { serviceAccounts: [{ name: 'builder', scopes: ['read', 'upload'] }] } });
    const plan = planNamespace([registry('default')], [builds, twice, view], input());
    expect(plan.refused.get('sa-twice')).toEqual({
      reason: 'InvalidSpec',
      message: 'spec.access.serviceAccounts[1]: ServiceAccount "builder" of namespace "team" has another rule on this index; give it one rule with every scope it needs',
    });
    expect(plan.refused.get('sa-view')?.message).toMatch(/^spec\.access\.serviceAccounts\[0\]: the upload scope is only for a hosted index/);
    const rp = plan.registries.get('default');
    expect(rp?.served.map((ix) => ix.metadata.name)).toEqual(['sa-builds']);
    expect(rp?.config?.serviceAccounts).toBe(true);
    expect(rp?.config?.toml).toContain('[kubernetes]');
  });

  it('serves an index with trusted publishers, and refuses them on a cached index, twice the same name, or pinning no repository', () => {
    const gh = { name: 'release', issuer: 'https://token.actions.githubusercontent.com', repository: 'acme/w' };
    const releases = index('tp-releases', { route: 'team/tp-releases', ecosystem: 'python', role: 'hosted', access: { trustedPublishers: [gh] } });
    const cached = index('tp-cached', { route: 'team/tp-cached', ecosystem: 'oci', role: 'cached', upstream: 'https://registry-1.docker.io', access: { trustedPublishers: [gh] } });
    const twice = index('tp-twice', { route: 'team/tp-twice', ecosystem: 'python', role: 'hosted', access: { trustedPublishers: [gh, { ...gh, repository: 'acme/v' }] } });
    const loose = index('tp-loose', { route: 'team/tp-loose', ecosystem: 'python', role: 'hosted', access: { trustedPublishers: [{ name: 'any', issuer: gh.issuer, environment: 'pypi' }] } });
    const plan = planNamespace([registry('default')], [releases, cached, twice, loose], input());
    expect(plan.refused.get('tp-cached')?.message).toMatch(/^spec\.access\.trustedPublishers is only for a hosted index/);
    expect(plan.refused.get('tp-twice')?.message).toBe('spec.access.trustedPublishers: the name "release" is given twice; a publisher\'s name is unique within its index');
    expect(plan.refused.get('tp-loose')?.message).toMatch(/names no repository or projectPath/);
    expect(plan.registries.get('default')?.served.map((ix) => ix.metadata.name)).toEqual(['tp-releases']);
    expect(plan.registries.get('default')?.config?.toml).toContain('[[index.trusted_publisher]]');
  });

  it('refuses a webhook URL with user info, and takes a URL from an opted-in Secret', () => {
    const creds = index('creds', { route: 'x/creds', ecosystem: 'python', role: 'hosted', webhooks: [{ url: 'https://ci:hunter2@ci.example/hook' }] });
    const both = index('both', { route: 'x/both', ecosystem: 'python', role: 'hosted', webhooks: [{ url: 'https://ci.example/hook', urlSecretRef: { name: 'hook-urls', key: 'chat' } }] });
    const chat = index('chat', { route: 'x/chat', ecosystem: 'python', role: 'hosted', webhooks: [{ urlSecretRef: { name: 'hook-urls', key: 'chat' }, events: ['upload'] }] });
    const plan = planNamespace([registry('default')], [creds, both, chat], input());
    expect(plan.refused.get('creds')?.reason).toBe('InvalidSpec');
    expect(plan.refused.get('creds')?.message).toMatch(/^spec\.webhooks\[0\]\.url carries user info .*name it in spec\.webhooks\[0\]\.urlSecretRef$/);
    expect(plan.refused.get('creds')?.message).not.toContain('hunter2');
    expect(plan.refused.get('both')).toEqual({ reason: 'InvalidSpec', message: 'spec.webhooks[0]: give exactly one of url and urlSecretRef' });
    const rp = plan.registries.get('default');
    expect(rp?.served.map((ix) => ix.metadata.name)).toEqual(['chat']);
    expect(rp?.config?.toml).toContain('url_file = "/var/run/velodex/secrets/hook-urls/chat"');
    expect(rp?.config?.toml).not.toContain('hooks.chat.example');
    expect(rp?.config?.toml).not.toContain('hunter2');
  });
});

describe("the registry's config check, as the plan reads it", () => {
  const check = (toml: string, files: Record<string, string> = {}) => {
    try {
      checkConfigText(toml, 'test', (path) => {
        const value = files[path];
        if (value === undefined) throw Object.assign(new Error(`no ${path}`), { code: 'ENOENT' });
        return value;
      });
    } catch (err) {
      if (err instanceof ConfigError) return err;
      throw err;
    }
    throw new Error('the config was accepted');
  };
  const stanza = (name: string, body: string) => `[[index]]\nname = "${name}"\nroute = "x/${name}"\n${body}\n`;

  it('names the index a problem is in as data, whatever its message mentions', () => {
    // In one index: its own keys, a secret it cannot read, a key the schema does not know.
    expect(check(stanza('hosted', 'hosted = true\nupload_token_file = "/missing"')).index).toBe('hosted');
    expect(check(stanza('pypi', 'cached = "https://pypi.org/simple/"\nvolatile = true')).index).toBe('pypi');
    expect(check(stanza('odd', 'hosted = true\nflavour = "x"')).index).toBe('odd');
    // Across indexes: the one whose spec is wrong, not the member its message names.
    const images = stanza('images', 'ecosystem = "oci"\nhosted = true');
    const mixed = check(images + stanza('mixed', 'members = ["images"]'));
    expect(mixed.message).toContain('"images"');
    expect(mixed.index).toBe('mixed');
    // Outside every index: none.
    expect(check('[storage]\nbackend = "s3"\n').index).toBeUndefined();
  });

  it('refuses the index the check names and serves the rest', () => {
    const hosted = index('fine', { route: 'team/fine', ecosystem: 'python', role: 'hosted' });
    const images = index('imgs', { route: 'team/imgs', ecosystem: 'oci', role: 'hosted' });
    const mixed = index('blend', { route: 'team/blend', ecosystem: 'python', role: 'virtual', members: ['imgs'] });
    const plan = planNamespace([registry('default')], [hosted, images, mixed], input());
    expect(plan.registries.get('default')?.served.map((ix) => ix.metadata.name)).toEqual(['fine', 'imgs']);
    expect([...plan.refused.keys()]).toEqual(['blend']);
    expect(plan.refused.get('blend')?.reason).toBe('InvalidSpec');
  });

  it('refuses retention on an index that is not hosted oci (a CRD without the rule), naming the index, and serves retention on hosted oci', () => {
    const kept = index('kept', { route: 'team/kept', ecosystem: 'oci', role: 'hosted', retention: { untaggedAfter: '14d', keepTags: [{ match: 'v*', newest: 5 }] } });
    const py = index('py', { route: 'team/py', ecosystem: 'python', role: 'hosted', retention: { untaggedAfter: '7d' } });
    const plan = planNamespace([registry('default')], [kept, py], input());
    expect(plan.registries.get('default')?.served.map((ix) => ix.metadata.name)).toEqual(['kept']);
    expect(plan.refused.get('py')).toEqual({ reason: 'InvalidSpec', message: 'spec.retention applies to hosted oci indexes only; PackageIndex "py" is a hosted python index' });
    // The check of the registry agrees: the rendered keys reach the registry's config.
    expect(check(stanza('py', 'hosted = true\nkeep_tags = [{ match = "v*", newest = 2 }]')).index).toBe('py');
  });

  it('refuses a named token with a write scope on an index that is not hosted, or two tokens of one name (a CRD without the rules), naming the index', () => {
    const ref = { name: 'tokens', key: 'hosted' };
    const cache = index('cache2', { route: 'team/cache2', ecosystem: 'python', role: 'cached', upstream: 'https://pypi.org/simple/', tokens: [{ name: 'ci', secretRef: ref, scopes: ['read', 'upload'] }] });
    const blend = index('blend2', { route: 'team/blend2', ecosystem: 'oci', role: 'virtual', members: ['x'], tokens: [{ name: 'ci', secretRef: ref, scopes: ['upload', 'delete'] }] });
    const twice = index('twice', { route: 'team/twice', ecosystem: 'python', role: 'hosted', tokens: [{ name: 'ci', secretRef: ref, scopes: ['read'] }, { name: 'ci', secretRef: ref, scopes: ['upload'] }] });
    const plan = planNamespace([registry('default')], [cache, blend, twice], input());
    expect(plan.refused.get('cache2')).toEqual({
      reason: 'InvalidSpec',
      message: 'spec.tokens[ci]: the upload scope is only for a hosted index (a virtual index\'s writes land in its upload target, whose tokens apply); PackageIndex "cache2" is a cached python index',
    });
    expect(plan.refused.get('blend2')?.message).toMatch(/^spec\.tokens\[ci\]: the upload and delete scopes are only for a hosted index .*PackageIndex "blend2" is a virtual oci index$/);
    expect(plan.refused.get('twice')).toEqual({ reason: 'InvalidSpec', message: 'spec.tokens: the name "ci" is given twice; a token\'s name is unique within its index' });
  });

  it('refuses a quota on an index that is not hosted and a cache budget on one that is not cached (a CRD without the rules), naming the index', () => {
    const cache = index('cache', { route: 'team/cache', ecosystem: 'python', role: 'cached', upstream: 'https://pypi.org/simple/', quotaBytes: '1Gi' });
    const uploads = index('uploads', { route: 'team/uploads', ecosystem: 'oci', role: 'hosted', maxBytes: 1024 });
    const aged = index('aged', { route: 'team/aged', ecosystem: 'python', role: 'virtual', members: ['cache'], evictUnusedAfter: '30d' });
    const plan = planNamespace([registry('default')], [cache, uploads, aged], input());
    expect(plan.refused.get('cache')).toEqual({ reason: 'InvalidSpec', message: 'spec.quotaBytes is only for a hosted index; PackageIndex "cache" is a cached python index' });
    expect(plan.refused.get('uploads')).toEqual({ reason: 'InvalidSpec', message: 'spec.maxBytes is only for a cached index; PackageIndex "uploads" is a hosted oci index' });
    expect(plan.refused.get('aged')).toEqual({ reason: 'InvalidSpec', message: 'spec.evictUnusedAfter is only for a cached index; PackageIndex "aged" is a virtual python index' });
  });

  describe('spec.nodeMirror', () => {
    const mirrored = (registries: Array<{ registry: string; index: string }>): PackageRegistry => {
      const r = registry('default');
      return { ...r, spec: { ...r.spec, nodeMirror: { registries } } };
    };
    const hub = () => index('hub', { route: 'hub', ecosystem: 'oci', role: 'cached', upstream: 'https://registry-1.docker.io' });
    const ghcr = () => index('ghcr', { route: 'ghcr', ecosystem: 'oci', role: 'cached', upstream: 'https://ghcr.io' });

    it('renders every entry whose index is a served cached oci index', () => {
      const plan = planNamespace([mirrored([{ registry: 'docker.io', index: 'hub' }, { registry: 'ghcr.io', index: 'ghcr' }])], [hub(), ghcr()], input()).registries.get('default');
      expect(plan?.mirror).toEqual({ served: [{ registry: 'docker.io', index: 'hub' }, { registry: 'ghcr.io', index: 'ghcr' }], left: [] });
      expect(checkConfigText(plan?.config?.toml ?? '', 't', () => 'x').mirrors.map((m) => m.registry)).toEqual(['docker.io', 'ghcr.io']);
    });

    it('leaves out, with why, an entry whose index is missing, of another kind or refused, and serves the rest', () => {
      const images = index('images', { route: 'images', ecosystem: 'oci', role: 'hosted' });
      const refusedHub = index('quay', { route: 'quay', ecosystem: 'oci', role: 'cached', upstream: 'https://quay.io', upstreamCredentialsSecretRef: { name: 'hub-account' } });
      const plan = planNamespace(
        [
          mirrored([
            { registry: 'docker.io', index: 'hub' },
            { registry: 'ghcr.io', index: 'nope' },
            { registry: 'registry.example', index: 'images' },
            { registry: 'quay.io', index: 'quay' },
          ]),
        ],
        [hub(), images, refusedHub],
        input(),
      );
      const rp = plan.registries.get('default');
      expect(rp?.refusal).toBeUndefined();
      expect(rp?.mirror?.served).toEqual([{ registry: 'docker.io', index: 'hub' }]);
      expect(rp?.mirror?.left.map((l) => [l.entry.registry, l.message])).toEqual([
        ['ghcr.io', 'PackageIndex "nope" is not an index of this registry'],
        ['registry.example', 'PackageIndex "images" is a hosted oci index; a registry is mirrored by a cached oci index'],
        ['quay.io', 'PackageIndex "quay" is not served (SecretNotFound: spec.upstreamCredentialsSecretRef: Secret "hub-account" has no key "password")'],
      ]);
      expect(rp?.config?.toml).toContain('[[mirror]]');
    });

    it('leaves out an entry the registry refuses (a CRD without the rules let it through), not the registry', () => {
      const plan = planNamespace(
        [
          mirrored([
            { registry: 'docker.io', index: 'hub' },
            { registry: 'registry-1.docker.io', index: 'ghcr' },
            { registry: 'https://ghcr.io', index: 'ghcr' },
          ]),
        ],
        [hub(), ghcr()],
        input(),
      ).registries.get('default');
      expect(plan?.refusal).toBeUndefined();
      expect(plan?.mirror?.served).toEqual([{ registry: 'docker.io', index: 'hub' }]);
      expect(plan?.mirror?.left.map((l) => l.message)).toEqual([
        expect.stringMatching(/^the registry refuses it: config: mirror\[1\]\.registry: "docker.io" is also the registry of mirror\[0\]/),
        expect.stringMatching(/^the registry refuses it: config: mirror\[1\]\.registry: "https:\/\/ghcr.io" is not a registry host/),
      ]);
    });

    it('has no mirror plan without spec.nodeMirror', () => {
      expect(planNamespace([registry('default')], [hub()], input()).registries.get('default')?.mirror).toBeUndefined();
    });
  });
});
