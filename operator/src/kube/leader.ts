/**
 * Leader election on a `coordination.k8s.io` Lease, so that of several operator replicas only one
 * writes. The lease is taken or renewed with a replace that carries the resourceVersion read
 * (compare-and-swap on the API server): two candidates can never both win one term. A leader that
 * cannot renew within its lease duration stops leading (`onStop`) before another may take over;
 * a candidate takes an expired lease only after `leaseDurationSeconds` without renewal.
 */
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { isNotFound } from './client.js';

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds?: number;
  renewEveryMs?: number;
  onStart: () => void;
  onStop: () => void;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

export interface LeaderElection {
  isLeader(): boolean;
  stop(): Promise<void>;
}

/** The client serialises a V1MicroTime with the microseconds a Lease's times need. */
const microTime = (d: Date) => new V1MicroTime(d.getTime());

export function startLeaderElection(kc: KubeConfig, opts: LeaderOptions): LeaderElection {
  const api = kc.makeApiClient(CoordinationV1Api);
  const duration = opts.leaseDurationSeconds ?? 15;
  const every = opts.renewEveryMs ?? Math.max(1000, (duration * 1000) / 3);
  let leading = false;
  let lastRenew = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const lose = (why: string) => {
    if (!leading) return;
    leading = false;
    opts.log?.('stopped leading', { lease: opts.name, why });
    opts.onStop();
  };

  const attempt = async () => {
    const now = new Date();
    let lease: V1Lease | null = null;
    try {
      lease = await api.readNamespacedLease({ namespace: opts.namespace, name: opts.name });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const spec = { holderIdentity: opts.identity, leaseDurationSeconds: duration, renewTime: microTime(now) };
    if (!lease) {
      await api.createNamespacedLease({
        namespace: opts.namespace,
        body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: opts.name, namespace: opts.namespace }, spec: { ...spec, acquireTime: microTime(now), leaseTransitions: 0 } },
      });
      return true;
    }
    const holder = lease.spec?.holderIdentity;
    const renewed = lease.spec?.renewTime ? new Date(lease.spec.renewTime).getTime() : 0;
    const expired = now.getTime() > renewed + (lease.spec?.leaseDurationSeconds ?? duration) * 1000;
    if (holder && holder !== opts.identity && !expired) return false;
    const taking = holder !== opts.identity;
    await api.replaceNamespacedLease({
      namespace: opts.namespace,
      name: opts.name,
      body: {
        ...lease,
        spec: {
          ...lease.spec,
          ...spec,
          ...(taking ? { acquireTime: microTime(now), leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + 1 } : {}),
        },
      },
    });
    return true;
  };

  const tick = async () => {
    if (stopped) return;
    try {
      const won = await attempt();
      if (won) {
        lastRenew = Date.now();
        if (!leading) {
          leading = true;
          opts.log?.('started leading', { lease: opts.name, identity: opts.identity });
          opts.onStart();
        }
      } else {
        lose('another replica holds the lease');
      }
    } catch (err) {
      // A conflict (409) means another candidate wrote first; anything else is an API problem.
      if (leading && Date.now() - lastRenew > duration * 1000) lose(`could not renew: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
    } finally {
      if (!stopped) timer = setTimeout(() => void tick(), every);
    }
  };
  void tick();

  return {
    isLeader: () => leading,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      lose('shutting down');
    },
  };
}
