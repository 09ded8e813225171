/**
 * What the pods of a registry say about its indexes (`GET /+status` of each ready pod), merged
 * into each PackageIndex's status. A pod still on an older config may not list a new index: the
 * index is Ready only once every ready pod serves it (until then it is Reconciling).
 */
import { isPending, type Refusal } from '../plan/plan.js';
import type { PackageIndex, PackageIndexStatus } from '../resources/types.js';
import type { ConditionInput } from './conditions.js';
import type { PodReport } from './pod-status.js';
import { indexStored, overPrevious } from './stored.js';

export interface IndexState {
  status: Omit<PackageIndexStatus, 'conditions' | 'observedGeneration'>;
  conditions: ConditionInput[];
}

const TRUE = 'True' as const;
const FALSE = 'False' as const;

/** `pending`: the refusal ends by itself (kstatus Reconciling); by default as the plan says (`isPending`). */
export function refusedState(registry: string, refusal: Refusal, pending = isPending(refusal)): IndexState {
  return {
    status: { registry },
    conditions: [
      { type: 'Ready', status: FALSE, reason: refusal.reason, message: refusal.message },
      { type: 'Degraded', status: FALSE, reason: refusal.reason, message: 'not served' },
      { type: 'Reconciling', status: pending ? TRUE : FALSE, reason: refusal.reason, message: pending ? refusal.message : 'waiting for a change to the resources' },
      { type: 'Stalled', status: pending ? FALSE : TRUE, reason: refusal.reason, message: pending ? 'waiting for it' : refusal.message },
    ],
  };
}

/**
 * The UPSTREAM column: `online` or `offline` for one upstream; for several, how many are online
 * as the pod that sees the fewest says (`2/3 online`): each pod keeps its own view of them.
 */
function upstreamColumn(entries: ReadonlyArray<{ upstream?: { online?: number; total?: number } }>, offline: boolean): string {
  const counted = entries.flatMap((e) => (e.upstream?.total !== undefined && e.upstream.online !== undefined ? [{ online: e.upstream.online, total: e.upstream.total }] : []));
  const total = Math.max(0, ...counted.map((c) => c.total));
  if (total <= 1) return offline ? 'offline' : 'online';
  const online = Math.min(...counted.map((c) => c.online));
  return `${online}/${total} online`;
}

/** `1/3 online`: some of several upstreams back off (the index still serves fresh data from the others). */
function isPartlyOnline(column: string): boolean {
  const m = /^(\d+)\/(\d+) online$/.exec(column);
  return m !== null && m[1] !== m[2];
}

/** `url`: the index's base URL through the registry's Service. */
function upstreamsNamed(ix: PackageIndex): string {
  const several = ix.spec.upstreams;
  if (several && several.length > 1) return `no upstream (${several.map((u) => u.url).join(', ')})`;
  return `the upstream ${several?.[0]?.url ?? ix.spec.upstream ?? ''}`;
}

export function servedState(ix: PackageIndex, registry: string, url: string, reports: readonly PodReport[]): IndexState {
  const name = ix.metadata.name;
  const answered = reports.filter((r) => r.doc !== null);
  const entries = answered.flatMap((r) => (r.doc?.indexes ?? []).filter((e) => e.name === name));
  const serving = answered.filter((r) => r.doc?.indexes?.some((e) => e.name === name)).length;
  const offline = entries.some((e) => e.upstream?.offline === true);
  const serial = entries.reduce((max, e) => Math.max(max, e.serial ?? 0), 0);
  const status: IndexState['status'] = {
    registry,
    url,
    // Unknown until a pod has reported on it.
    ...(ix.spec.role === 'cached' && entries.length > 0 ? { upstreamOffline: offline, upstream: upstreamColumn(entries, offline) } : {}),
    serial,
    pods: reports.length,
    servingPods: serving,
    ...overPrevious(ix.status, indexStored(reports, name)),
  };
  const notReady = (reason: string, message: string): IndexState => ({
    status,
    conditions: [
      { type: 'Ready', status: FALSE, reason, message },
      { type: 'Degraded', status: FALSE, reason, message: 'not serving yet' },
      { type: 'Reconciling', status: TRUE, reason, message },
      { type: 'Stalled', status: FALSE, reason, message: 'nothing to change: waiting for pods' },
    ],
  });
  if (reports.length === 0) return notReady('NoReadyPods', `PackageRegistry "${registry}" has no ready pods`);
  if (answered.length === 0) return notReady('NoReadyPods', `no ready pod of PackageRegistry "${registry}" answered /+status (${reports[0]?.error ?? 'no answer'})`);
  if (serving < answered.length) return notReady('RollingOut', `${serving} of ${answered.length} ready pods serve this index; the others still run an older config`);
  const served = `served by ${serving} pod${serving === 1 ? '' : 's'} at ${url}`;
  const partly = status.upstream !== undefined && isPartlyOnline(status.upstream) ? `; upstreams ${status.upstream}` : '';
  const ready: ConditionInput = { type: 'Ready', status: TRUE, reason: 'Serving', message: offline ? `${served}; UpstreamOffline: cached data only` : `${served}${partly}` };
  const degraded: ConditionInput = offline
    ? { type: 'Degraded', status: TRUE, reason: 'UpstreamOffline', message: `${upstreamsNamed(ix)} does not answer; cached data is served` }
    : { type: 'Degraded', status: FALSE, reason: 'Serving', message: 'no impairment' };
  return {
    status,
    conditions: [ready, degraded, { type: 'Reconciling', status: FALSE, reason: 'Serving', message: 'up to date' }, { type: 'Stalled', status: FALSE, reason: 'Serving', message: 'up to date' }],
  };
}
