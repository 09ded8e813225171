/**
 * The velodex operator: watches PackageRegistries, PackageIndexes and the Secrets and Pods they
 * depend on, and reconciles each namespace that has any (reconcile/namespace.ts) through one keyed
 * queue. Only the leader (a Lease in its own namespace) reconciles; a replica that loses the lease
 * exits, and its restart is a fresh candidate.
 *
 * Environment: VELODEX_IMAGE (the registry image, normally this image), VELODEX_ALLOWED_IMAGES (the
 * other images a PackageRegistry may name in spec.image: patterns, comma-separated; plan/images.ts),
 * POD_NAMESPACE and POD_NAME (the Lease's namespace and this replica's identity; the chart sets
 * them from the downward API),
 * VELODEX_OPERATOR_PORT (health endpoints, default 8081), VELODEX_RESYNC_SECONDS (how often each
 * namespace's pod statuses are read again, default 30).
 */
import { createServer } from 'node:http';
import { hostname } from 'node:os';
import { CoreV1Api, makeInformer, type KubernetesObject } from '@kubernetes/client-node';
import { isNotFound, kubeClient, loadKubeConfig, PLURAL } from './kube/client.js';
import { startLeaderElection } from './kube/leader.js';
import { parseAllowedImages } from './plan/images.js';
import { SECRET_OPT_IN_SELECTOR } from './plan/secret-refs.js';
import { KeyedQueue } from './reconcile/queue.js';
import { reconcileNamespace } from './reconcile/namespace.js';
import { GROUP, VERSION } from './resources/types.js';

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

  const known = new Set<string>();
  const queue = new KeyedQueue(
    async (ns) => {
      await reconcileNamespace(ns, { kube, render: { defaultImage: image }, allowedImages, log });
      queue.addAfter(ns, resyncMs);
    },
    { onError: (ns, err, retryInMs) => log('reconcile failed', { namespace: ns, error: err instanceof Error ? err.message : String(err), retryInMs }) },
  );
  // Registries and indexes name the namespaces to reconcile; a Secret or Pod event matters only
  // in a namespace that has them.
  const enqueue = (always: boolean) => (obj: KubernetesObject) => {
    const ns = obj.metadata?.namespace;
    if (!ns || (!always && !known.has(ns))) return;
    known.add(ns);
    // A second's grace gathers the events of one `kubectl apply -f` of many resources into one
    // reconcile, so the pods are not rolled once per resource as they arrive.
    queue.addAfter(ns, EVENT_GRACE_MS);
  };

  const core = kc.makeApiClient(CoreV1Api);
  const custom = (plural: string) => () => kube.listAll(plural);
  const watched = [
    { always: true, informer: makeInformer(kc, `/apis/${GROUP}/${VERSION}/${PLURAL.PackageRegistry}`, custom(PLURAL.PackageRegistry)) },
    { always: true, informer: makeInformer(kc, `/apis/${GROUP}/${VERSION}/${PLURAL.PackageIndex}`, custom(PLURAL.PackageIndex)) },
    // Only the Secrets that opted in (plan/secret-refs.ts): the others are never listed, watched or cached.
    {
      always: false,
      informer: makeInformer(kc, '/api/v1/secrets', () => core.listSecretForAllNamespaces({ labelSelector: SECRET_OPT_IN_SELECTOR }), SECRET_OPT_IN_SELECTOR),
    },
    {
      always: false,
      informer: makeInformer(kc, '/api/v1/pods', () => core.listPodForAllNamespaces({ labelSelector: 'app.kubernetes.io/name=velodex' }), 'app.kubernetes.io/name=velodex'),
    },
  ];
  const informers = watched.map((w) => w.informer);
  for (const { always, informer: inf } of watched) {
    for (const verb of ['add', 'update', 'delete'] as const) inf.on(verb, enqueue(always));
    // A dropped watch is restarted after a pause; the informer lists again and nothing is missed.
    inf.on('error', (err: unknown) => {
      log('watch failed; restarting', { error: err instanceof Error ? err.message : String(err) });
      setTimeout(() => void inf.start().catch(() => undefined), 3_000);
    });
  }

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
      // Registries and indexes first: they decide which namespaces Secret and Pod events concern.
      void (async () => {
        for (const inf of informers) await inf.start();
      })().catch((err: unknown) => {
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
    await Promise.all(informers.map((i) => i.stop()));
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
    await kube.listRegistries();
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
