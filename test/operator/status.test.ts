/**
 * What each PackageIndex's status says, from what the ready pods of its registry answer on
 * `/+status` (the API-server suite has no pods, so the served paths are checked here): Ready once
 * every ready pod serves it, RollingOut while some still run an older config, Degraded with
 * UpstreamOffline when a cached index's upstream is down, NoReadyPods without an answering pod.
 * Conditions keep their transition time while their status holds.
 */
import { describe, expect, it } from 'vitest';
import { nextConditions } from '../../operator/src/status/conditions.js';
import { servedState, type PodReport } from '../../operator/src/status/merge.js';
import { API_VERSION, type PackageIndex } from '../../operator/src/resources/types.js';

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
