/**
 * What each PackageIndex's status says, from what the ready pods of its registry answer on
 * `/+status` (the API-server suite has no pods, so the served paths are checked here): Ready once
 * every ready pod serves it, RollingOut while some still run an older config, Degraded with
 * UpstreamOffline when a cached index's upstream is down, NoReadyPods without an answering pod.
 * Conditions keep their transition time while their status holds. Stored bytes, the SIZE column
 * and the last collection come from the pod with the newest count; a pod that reports none leaves
 * the last count standing.
 */
import { describe, expect, it } from 'vitest';
import { nextConditions } from '../../operator/src/status/conditions.js';
import { certificateCondition } from '../../operator/src/status/extension-conditions.js';
import { nodeMirrorCondition } from '../../operator/src/status/node-mirror.js';
import { refusedState, servedState } from '../../operator/src/status/merge.js';
import { runningVersions, type PodReport, type PodStatusDoc } from '../../operator/src/status/pod-status.js';
import { humanSize, registryStored } from '../../operator/src/status/stored.js';
import { API_VERSION, type PackageIndex, type PackageRegistry } from '../../operator/src/resources/types.js';

const pypi: PackageIndex = {
  apiVersion: API_VERSION,
  kind: 'PackageIndex',
  metadata: { name: 'pypi', namespace: 'team', generation: 3 },
  spec: { route: 'team/pypi', ecosystem: 'python', role: 'cached', upstream: 'https://pypi.org/simple/' },
};
const URL = 'http://default.team.svc/team/pypi/simple/';
const pod = (name: string, indexes: { name: string; serial?: number; offline?: boolean }[]): PodReport => ({
  pod: name,
  doc: { instance: name, indexes: indexes.map((i) => ({ name: i.name, serial: i.serial ?? 0, upstream: { offline: i.offline ?? false } })) },
});
const cond = (s: ReturnType<typeof servedState>, type: string) => s.conditions.find((c) => c.type === type);

describe('servedState', () => {
  it('shows several upstreams as "2/3 online" (the fewest any pod sees), Ready while one answers, Degraded when none does', () => {
    const mirror: PackageIndex = { ...pypi, spec: { ...pypi.spec, upstream: undefined, upstreams: [{ url: 'https://a.example/simple/' }, { url: 'https://b.example/simple/' }, { url: 'https://pypi.org/simple/' }] } };
    const seen = (name: string, online: number, offline = false): PodReport => ({ pod: name, doc: { instance: name, indexes: [{ name: 'pypi', serial: 1, upstream: { offline, online, total: 3 } }] } });
    const partly = servedState(mirror, 'default', URL, [seen('a', 3), seen('b', 2)]);
    expect(partly.status).toMatchObject({ upstream: '2/3 online', upstreamOffline: false });
    expect(cond(partly, 'Ready')).toMatchObject({ status: 'True', message: expect.stringContaining('upstreams 2/3 online') });
    expect(cond(partly, 'Degraded')).toMatchObject({ status: 'False' });
    expect(servedState(mirror, 'default', URL, [seen('a', 3)]).status.upstream).toBe('3/3 online');
    const none = servedState(mirror, 'default', URL, [seen('a', 0, true)]);
    expect(none.status.upstream).toBe('0/3 online');
    expect(cond(none, 'Degraded')).toMatchObject({ status: 'True', reason: 'UpstreamOffline', message: expect.stringContaining('no upstream (https://a.example/simple/, https://b.example/simple/, https://pypi.org/simple/) does not answer') });
  });

  it('is Ready when every ready pod serves the index, with the highest serial and the pod counts', () => {
    const s = servedState(pypi, 'default', URL, [pod('a', [{ name: 'pypi', serial: 4 }]), pod('b', [{ name: 'pypi', serial: 7 }])]);
    expect(cond(s, 'Ready')).toMatchObject({ status: 'True', reason: 'Serving', message: `served by 2 pods at ${URL}` });
    expect(cond(s, 'Degraded')?.status).toBe('False');
    expect(cond(s, 'Reconciling')?.status).toBe('False');
    expect(s.status).toMatchObject({ url: URL, serial: 7, pods: 2, servingPods: 2, upstreamOffline: false, upstream: 'online' });
  });

  it('is RollingOut (Reconciling) while some ready pods run a config without it', () => {
    const s = servedState(pypi, 'default', URL, [pod('a', [{ name: 'pypi' }]), pod('b', [{ name: 'other' }])]);
    expect(cond(s, 'Ready')).toMatchObject({ status: 'False', reason: 'RollingOut', message: '1 of 2 ready pods serve this index; the others still run an older config' });
    expect(cond(s, 'Reconciling')?.status).toBe('True');
    expect(cond(s, 'Stalled')?.status).toBe('False');
  });

  it('is Ready and Degraded (UpstreamOffline) when a pod says the upstream is offline', () => {
    const s = servedState(pypi, 'default', URL, [pod('a', [{ name: 'pypi' }]), pod('b', [{ name: 'pypi', offline: true }])]);
    expect(cond(s, 'Ready')?.status).toBe('True');
    expect(cond(s, 'Degraded')).toMatchObject({ status: 'True', reason: 'UpstreamOffline' });
    expect(cond(s, 'Ready')?.message).toBe(`served by 2 pods at ${URL}; UpstreamOffline: cached data only`);
    expect(s.status).toMatchObject({ upstreamOffline: true, upstream: 'offline' });
  });

  it('is NoReadyPods without ready pods, or when none answers, naming the error', () => {
    expect(servedState(pypi, 'default', URL, []).status.upstream).toBeUndefined();
    expect(cond(servedState(pypi, 'default', URL, []), 'Ready')).toMatchObject({ status: 'False', reason: 'NoReadyPods', message: 'PackageRegistry "default" has no ready pods' });
    const silent = servedState(pypi, 'default', URL, [{ pod: 'a', doc: null, error: 'connect ECONNREFUSED' }]);
    expect(cond(silent, 'Ready')?.message).toContain('connect ECONNREFUSED');
  });
});

/** A pod's answer with the storage fields of the registry's /+status contract. */
const counted = (name: string, countedAt: string | null, total: number | null, perIndex: Record<string, number | null>, lastRun?: NonNullable<PodStatusDoc['gc']>['last_run']): PodReport => ({
  pod: name,
  doc: {
    instance: name,
    indexes: Object.entries(perIndex).map(([n, bytes]) => ({ name: n, serial: 1, upstream: { offline: false }, stored: bytes === null ? null : { bytes, objects: 3 } })),
    stored: total === null ? null : { bytes: total, objects: 9, counted_at: countedAt },
    gc: { last_run: lastRun ?? null },
  },
});

describe('stored bytes and the last collection', () => {
  it('takes the index count of the pod that counted last, with a human size and the latest collection of any pod', () => {
    const s = servedState(pypi, 'default', URL, [
      counted('a', '2026-03-01T10:00:00Z', 5_000, { pypi: 1_000 }, { ended_at: '2026-03-01T09:00:00.123Z', result: 'ok', bytes_deleted: 4096, blobs_deleted: 2 }),
      counted('b', '2026-03-01T10:05:00Z', 6_000, { pypi: 12_897_485 }, { ended_at: '2026-03-01T08:00:00Z', result: 'failed', bytes_deleted: 0, blobs_deleted: 0, error: 'store unavailable' }),
    ]);
    expect(s.status).toMatchObject({ storedBytes: 12_897_485, size: '12.3 MiB', lastCollection: { time: '2026-03-01T09:00:00Z', result: 'ok', reclaimedBytes: 4096 } });
  });

  it('takes the first answering pod when none says when it counted, and skips a pod that has not counted the index yet', () => {
    const s = servedState(pypi, 'default', URL, [{ pod: 'down', doc: null, error: 'timeout' }, counted('a', null, null, { pypi: null }), counted('b', null, 10, { pypi: 700 }), counted('c', null, 10, { pypi: 900 })]);
    expect(s.status).toMatchObject({ storedBytes: 700, size: '700 B' });
    expect(s.status).not.toHaveProperty('lastCollection');
  });

  it('keeps the previous count, size and collection while no pod reports one (an older image, pods rolling)', () => {
    const previous = { storedBytes: 2048, size: '2.0 KiB', lastCollection: { time: '2026-03-01T09:00:00Z', result: 'ok' as const, reclaimedBytes: 1 } };
    const s = servedState({ ...pypi, status: previous }, 'default', URL, [pod('old-image', [{ name: 'pypi' }])]);
    expect(s.status).toMatchObject(previous);
    const none = servedState(pypi, 'default', URL, [pod('old-image', [{ name: 'pypi' }])]);
    for (const key of ['storedBytes', 'size', 'lastCollection']) expect(none.status).not.toHaveProperty(key);
  });

  it("reads the registry's total (a blob two indexes hold counted once) from the newest count", () => {
    const total = registryStored([counted('a', '2026-03-01T10:00:00Z', 5_000, {}), counted('b', '2026-03-01T11:00:00Z', 3 * 1024 ** 3, {})]);
    expect(total).toEqual({ storedBytes: 3 * 1024 ** 3, size: '3.0 GiB' });
  });

  it.each([
    [0, '0 B'],
    [1023, '1023 B'],
    [1024, '1.0 KiB'],
    [1536, '1.5 KiB'],
    [1024 * 1024 - 1, '1.0 MiB'],
    [10 * 1024 ** 3, '10.0 GiB'],
    [1.5 * 1024 ** 4, '1.5 TiB'],
  ])('writes %i bytes as %s', (bytes, text) => {
    expect(humanSize(bytes)).toBe(text);
  });
});

describe('nextConditions', () => {
  it('keeps lastTransitionTime while a status holds, and moves it when the status changes', () => {
    const t0 = new Date('2026-01-01T00:00:00Z');
    const t1 = new Date('2026-01-01T00:05:00Z');
    const first = nextConditions(undefined, [{ type: 'Ready', status: 'False', reason: 'NoReadyPods', message: 'x' }], 1, t0);
    const same = nextConditions(first, [{ type: 'Ready', status: 'False', reason: 'RollingOut', message: 'y' }], 2, t1);
    expect(same[0]).toMatchObject({ lastTransitionTime: '2026-01-01T00:00:00Z', reason: 'RollingOut', observedGeneration: 2 });
    const changed = nextConditions(same, [{ type: 'Ready', status: 'True', reason: 'Serving', message: 'z' }], 2, t1);
    expect(changed[0]?.lastTransitionTime).toBe('2026-01-01T00:05:00Z');
  });
});

describe('runningVersions (the VERSION column)', () => {
  const at = (version?: string): PodReport => ({ pod: 'p', doc: version === undefined ? {} : { version } });
  it('names the version the pods run, both while a roll to a new image is under way, and none when no pod says', () => {
    expect(runningVersions([at('0.1.0'), at('0.1.0')])).toBe('0.1.0');
    expect(runningVersions([at('0.2.0'), at('0.1.0'), { pod: 'gone', doc: null }])).toBe('0.1.0, 0.2.0');
    expect(runningVersions([at(), { pod: 'gone', doc: null, error: 'timeout' }])).toBeUndefined();
  });
});

describe('the NodeMirror condition of a registry', () => {
  it('is True with the map when every entry is served, False naming each entry left out and why', () => {
    expect(nodeMirrorCondition({ served: [{ registry: 'docker.io', index: 'hub' }], left: [] })).toEqual({ type: 'NodeMirror', status: 'True', reason: 'Serving', message: 'mirrors docker.io by hub' });
    expect(nodeMirrorCondition({ served: [{ registry: 'docker.io', index: 'hub' }], left: [{ entry: { registry: 'ghcr.io', index: 'nope' }, message: 'PackageIndex "nope" is not an index of this registry' }] })).toEqual({
      type: 'NodeMirror',
      status: 'False',
      reason: 'EntriesLeftOut',
      message: 'not mirrored: ghcr.io (index nope): PackageIndex "nope" is not an index of this registry; mirrors docker.io by hub',
    });
  });
});

describe('the Certificate condition of a registry with spec.tls.certManager', () => {
  const registry: PackageRegistry = {
    apiVersion: API_VERSION,
    kind: 'PackageRegistry',
    metadata: { name: 'default', namespace: 'team' },
    spec: { storage: { endpoint: 'http://minio:9000', bucket: 'velodex', credentialsSecretRef: { name: 's3' } } },
  };
  const cm = { issuerRef: { name: 'corp-ca', kind: 'ClusterIssuer' as const } };
  const ready = (status: string, extra: Record<string, string> = {}) => ({ conditions: [{ type: 'Issuing', status: 'True' }, { type: 'Ready', status, ...extra }], notAfter: '2027-03-01T00:00:00Z' });

  it('is Unknown until cert-manager has said anything, True once it says Ready, False with its reason and message when it says not', () => {
    expect(certificateCondition(registry, 'registry-cert', cm, undefined)).toEqual({
      type: 'Certificate',
      status: 'Unknown',
      reason: 'Requested',
      message:
        'Certificate "default" asks ClusterIssuer "corp-ca" for Secret "registry-cert" (default, default.team, default.team.svc, default.team.svc.cluster.local); the pods serve it once cert-manager has filled it (kubectl describe certificate default -n team)',
    });
    expect(certificateCondition(registry, 'registry-cert', cm, ready('True'))).toEqual({
      type: 'Certificate',
      status: 'True',
      reason: 'Issued',
      message: 'Certificate "default" from ClusterIssuer "corp-ca" is issued into Secret "registry-cert", valid until 2027-03-01T00:00:00Z; cert-manager renews it, and the pods serve each renewal without a roll',
    });
    expect(certificateCondition(registry, 'registry-cert', { issuerRef: { name: 'ca' } }, ready('False', { reason: 'DoesNotExist', message: 'Issuer "ca" not found' }))).toEqual({
      type: 'Certificate',
      status: 'False',
      reason: 'NotIssued',
      message: 'Certificate "default" from Issuer "ca" is not issued: DoesNotExist: Issuer "ca" not found (kubectl describe certificate default -n team)',
    });
  });
});

describe('an index its registry cannot serve yet', () => {
  const kstatus = (s: ReturnType<typeof refusedState>) => Object.fromEntries(s.conditions.map((c) => [c.type, c.status]));
  it('is Stalled when a person must change something, Reconciling while its certificate is being issued', () => {
    expect(kstatus(refusedState('default', { reason: 'SecretNotFound', message: 'm' }))).toEqual({ Ready: 'False', Degraded: 'False', Reconciling: 'False', Stalled: 'True' });
    const pending = refusedState('default', { reason: 'CertificatePending', message: 'waiting for Certificate "default"' });
    expect(kstatus(pending)).toEqual({ Ready: 'False', Degraded: 'False', Reconciling: 'True', Stalled: 'False' });
    expect(pending.conditions.find((c) => c.type === 'Reconciling')?.message).toBe('waiting for Certificate "default"');
    // Unless nothing will issue it (cert-manager not installed): the caller says so.
    expect(kstatus(refusedState('default', { reason: 'CertificatePending', message: 'm' }, false))).toMatchObject({ Reconciling: 'False', Stalled: 'True' });
  });
});
