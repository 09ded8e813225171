/**
 * The velodex operator: watches PackageRegistries, PackageIndexes and the Secrets and Pods they
 * depend on (kube/informers.ts: the reconciles read these caches), maps each change to the
 * registries it affects (reconcile/keys.ts) and reconciles each registry (reconcile/registry.ts)
 * through one keyed queue. Only the leader (a Lease in its own namespace) watches and reconciles;
 * a replica that loses the lease exits, and its restart is a fresh candidate.
 *
 * Environment: VELODEX_IMAGE (the registry image, normally this image), VELODEX_ALLOWED_IMAGES (the
 * other images a PackageRegistry may name in spec.image: patterns, comma-separated; plan/images.ts),
 * POD_NAMESPACE and POD_NAME (the Lease's namespace and this replica's identity; the chart sets
 * them from the downward API),
 * VELODEX_OPERATOR_PORT (health endpoints, default 8081), VELODEX_RESYNC_SECONDS (how often each
 * registry's pod statuses are read again, default 30).
 */
import { createServer } from 'node:http';
import { hostname } from 'node:os';
import { isNotFound, kubeClient, loadKubeConfig, PLURAL } from './kube/client.js';
import { Informers } from './kube/informers.js';
import { startLeaderElection } from './kube/leader.js';
import { parseAllowedImages } from './plan/images.js';
import { EventKeys } from './reconcile/keys.js';
import { KeyedQueue } from './reconcile/queue.js';
import { reconcileRegistry } from './reconcile/registry.js';

const EVENT_GRACE_MS = 1000;

const log = (msg: string, fields: Record<string, unknown> = {}) => process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), msg, ...fields })}\n`);

function env(name: string, fallback?: string): string {
  const v = process.env[name];
  if (v !== undefined && v !== '') return v;
  if (fallback !== undefined) return fallback;
  throw new Error(`${name} is not set`);
}

async function main(): Promise<void> {
  const kc = loadKubeConfig();
  const kube = kubeClient(kc);
  const image = env('VELODEX_IMAGE');
  const allowedImages = parseAllowedImages(process.env.VELODEX_ALLOWED_IMAGES);
  const namespace = env('POD_NAMESPACE', 'velodex-system');
  const identity = env('POD_NAME', hostname());
  const resyncMs = Number(env('VELODEX_RESYNC_SECONDS', '30')) * 1000;
  const port = Number(env('VELODEX_OPERATOR_PORT', '8081'));

  await checkApi(kube);

  const informers = new Informers(kc, kube, log);
  const queue = new KeyedQueue(
    async (key) => {
      const live = await reconcileRegistry(key, { kube, view: informers, render: { defaultImage: image }, allowedImages, log });
      if (live) queue.addAfter(key, resyncMs);
    },
    { onError: (key, err, retryInMs) => log('reconcile failed', { registry: key, error: err instanceof Error ? err.message : String(err), retryInMs }) },
  );
  const keys = new EventKeys(informers);
  informers.onEvent((event) => {
    // A second's grace gathers the events of one `kubectl apply -f` of many resources into one
    // reconcile, so the pods are not rolled once per resource as they arrive.
    for (const key of keys.of(event)) queue.addAfter(key, EVENT_GRACE_MS);
  });

  // Ready means this process reached the API server and runs its election: a standby replica is
  // Ready too (readiness tied to leadership would hold a two-replica rollout, and `helm --wait`,
  // forever). Who leads is the Lease's holderIdentity.
  const health = createServer((req, res) => {
    const ok = req.url === '/healthz' || req.url === '/readyz';
    res.writeHead(ok ? 200 : 404, { 'content-type': 'text/plain' }).end(ok ? 'ok\n' : 'not found\n');
  });
  health.listen(port);

  const election = startLeaderElection(kc, {
    namespace,
    name: 'velodex-operator',
    identity,
    log,
    onStart: () => {
      // Once every cache is filled, everything in it is reconciled once; events do the rest.
      informers
        .start()
        .then(() => {
          for (const key of keys.all()) queue.add(key);
        })
        .catch((err: unknown) => {
          log('cannot start watching', { error: err instanceof Error ? err.message : String(err) });
          process.exit(1);
        });
    },
    onStop: () => {
      log('lost the lease; exiting so a restart becomes a fresh candidate');
      process.exit(1);
    },
  });

  const shutdown = async () => {
    queue.stop();
    await informers.stop();
    await election.stop().catch(() => undefined);
    health.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
  log('velodex operator started', { identity, leaseNamespace: namespace, image, allowedImages });
}

/** Fails start-up with one clear line when the API is unreachable or the CRDs are not installed. */
async function checkApi(kube: ReturnType<typeof kubeClient>): Promise<void> {
  const server = kube.config.getCurrentCluster()?.server ?? '(no cluster configured)';
  try {
    await kube.listAll(PLURAL.PackageRegistry);
  } catch (err) {
    if (isNotFound(err)) throw new Error(`the PackageRegistry CRD is not installed at ${server}: kubectl apply -f crds/ (or install the Helm chart)`);
    const cause = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new Error(`cannot reach the Kubernetes API at ${server}: ${cause}`);
  }
}

main().catch((err: unknown) => {
  log('operator failed to start', { error: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
