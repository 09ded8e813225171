/**
 * One reconcile of one registry key (`namespace/name`, reconcile/keys.ts): plan what the
 * PackageRegistry serves of the PackageIndexes that name it, apply its objects, ask its ready pods
 * for `/+status`, and write the status of the registry and of each of those indexes where it
 * changed. Everything is read from the informers' caches (kube/informers.ts); the API server is
 * asked only whether an unlabelled Secret exists, for the Deployment just applied, and whether it
 * serves the kinds of the registry's HTTPRoute or Certificate (reconcile/extension-objects.ts).
 * Idempotent: running it twice in a row writes nothing the second time.
 *
 * A registry whose config cannot be built (its storage Secret missing, say) keeps its objects as
 * they are: pods already serving go on serving the last good config; only its Certificate is
 * applied, since the Secret it waits for may be the one cert-manager fills. A key whose registry does
 * not exist tells each index naming it so (`RegistryNotFound`).
 */
import type { V1Pod } from '@kubernetes/client-node';
import type { Kube } from '../kube/client.js';
import type { ClusterView } from '../kube/informers.js';
import { isPending, planNamespace, registryOf, type Refusal, type RegistryPlan } from '../plan/plan.js';
import { referencedSecretNames } from '../plan/secret-refs.js';
import { CHECKSUM_ANNOTATION, configChecksum, DEFAULT_SERVICE_PORT, DEFAULT_TLS_SERVICE_PORT, renderObjects, selectorOf, servicePort, type RenderOptions } from '../render/objects.js';
import { externalUrl, REGISTRY_PORT } from '../render/registry-config.js';
import type { Condition, PackageIndex, PackageIndexStatus, PackageRegistry, PackageRegistryStatus } from '../resources/types.js';
import { nextConditions, type ConditionInput } from '../status/conditions.js';
import { nodeMirrorCondition } from '../status/node-mirror.js';
import { refusedState, servedState } from '../status/merge.js';
import { getPodStatus } from '../status/pod-fetch.js';
import { runningVersions, type PodReport, type PodStatusDoc } from '../status/pod-status.js';
import { overPrevious, registryStored } from '../status/stored.js';
import { applyExtensionObjects } from './extension-objects.js';
import { splitKey } from './keys.js';
import { UnwantedObjects } from './unwanted-objects.js';

export interface ReconcileDeps {
  kube: Kube;
  /** The informers' caches. */
  view: ClusterView;
  render: RenderOptions;
  /** Image patterns a registry may name besides `render.defaultImage` (plan/images.ts); none by default. */
  allowedImages?: readonly string[];
  /** Fetches a pod's `/+status` (tests and the e2e harness may reach pods another way). */
  podStatus?: (pod: V1Pod) => Promise<PodStatusDoc>;
  now?: () => Date;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

const POD_STATUS_TIMEOUT_MS = 3_000;
const unwanted = new UnwantedObjects();

/** Reconciles `key`; false when it names nothing any more (no registry, no index): no resync is due. */
export async function reconcileRegistry(key: string, deps: ReconcileDeps): Promise<boolean> {
  const { kube, view } = deps;
  const { namespace, name } = splitKey(key);
  const now = deps.now ?? (() => new Date());
  const registries = view.registries(namespace).filter((r) => r.metadata.name === name);
  const indexes = view.indexes(namespace).filter((ix) => registryOf(ix) === name);
  if (registries.length === 0 && indexes.length === 0) return false;
  const secrets = view.secrets(namespace);
  const notOptedIn = await secretsNotOptedIn(kube, namespace, referencedSecretNames(registries, indexes), secrets);
  const plan = planNamespace(registries, indexes, { secrets, notOptedIn, images: { defaultImage: deps.render.defaultImage, allowed: deps.allowedImages ?? [] } });

  const rp = plan.registries.get(name);
  if (rp?.config) for (const obj of renderObjects(rp.registry, rp.config, secrets, deps.render)) await kube.apply(obj);
  const extensions = rp ? await applyExtensionObjects(kube, rp.registry, rp.config !== null) : [];
  // A wait for a certificate ends by itself, unless what would end it is missing (cert-manager not installed).
  const waitEnds = (refusal: Refusal) => isPending(refusal) && !extensions.some((c) => c.status === 'False' && c.reason === 'CertManagerMissing');
  if (rp?.config) await unwanted.remove(kube, rp.registry);
  const reports = rp ? await podReports(rp, namespace, deps) : [];

  // The plan serves each index or refuses it, its refusal keyed by the index it is about.
  for (const ix of indexes) {
    const refusal = plan.refused.get(ix.metadata.name);
    if (refusal) await writeStatus(deps, 'PackageIndex', ix, refusedState(name, refusal, waitEnds(refusal)), now());
  }
  if (!rp) return true;
  for (const ix of rp.served) await writeStatus(deps, 'PackageIndex', ix, servedState(ix, name, indexUrl(ix, rp.registry), reports), now());
  await writeRegistryStatus(deps, rp, reports, secrets, extensions, rp.refusal !== undefined && waitEnds(rp.refusal), now());
  return true;
}

/**
 * The referenced Secrets that exist but are not among the opted-in ones: asked by name for their
 * metadata only, so the status can say "label it" rather than "it does not exist".
 */
async function secretsNotOptedIn(kube: Kube, namespace: string, referenced: Set<string>, optedIn: ReadonlyMap<string, unknown>): Promise<Set<string>> {
  const found = new Set<string>();
  for (const name of referenced) if (!optedIn.has(name) && (await kube.secretExists(namespace, name))) found.add(name);
  return found;
}

/** The Service's in-cluster base URL: https with `spec.tls`. */
export function registryUrl(registry: PackageRegistry): string {
  // Declared for clients outside: the address every client is told (the Ingress or HTTPRoute reaches the Service).
  const external = externalUrl(registry);
  if (external) return external;
  const port = servicePort(registry);
  const scheme = registry.spec.tls ? 'https' : 'http';
  const usual = registry.spec.tls ? DEFAULT_TLS_SERVICE_PORT : DEFAULT_SERVICE_PORT;
  return `${scheme}://${registry.metadata.name}.${registry.metadata.namespace}.svc${port === usual ? '' : `:${port}`}`;
}

/** Where a client points: a Simple root for Python, an image reference prefix for OCI. */
export function indexUrl(ix: PackageIndex, registry: PackageRegistry): string {
  const route = ix.spec.route.replace(/^\/+|\/+$/g, '');
  if (ix.spec.ecosystem === 'oci') return `${registryUrl(registry).replace(/^https?:\/\//, '')}/${route}`;
  return `${registryUrl(registry)}/${route}/simple/`;
}

async function podReports(rp: RegistryPlan, namespace: string, deps: ReconcileDeps): Promise<PodReport[]> {
  const pods = deps.view.pods(namespace, selectorOf(rp.registry)).filter(isReady);
  // Pods still on an older config count too: their /+status does not list a new index yet.
  const fetchStatus = deps.podStatus ?? ((pod: V1Pod) => fetchPodStatus(pod, rp.registry.spec.tls !== undefined));
  return Promise.all(
    pods.map(async (pod): Promise<PodReport> => {
      const name = pod.metadata?.name ?? '?';
      try {
        return { pod: name, doc: await fetchStatus(pod) };
      } catch (err) {
        return { pod: name, doc: null, error: err instanceof Error ? err.message : String(err) };
      }
    }),
  );
}

function isReady(pod: V1Pod): boolean {
  return !pod.metadata?.deletionTimestamp && pod.status?.phase === 'Running' && (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

async function fetchPodStatus(pod: V1Pod, tls: boolean): Promise<PodStatusDoc> {
  const ip = pod.status?.podIP;
  if (!ip) throw new Error('the pod has no IP');
  return (await getPodStatus(ip, REGISTRY_PORT, tls, POD_STATUS_TIMEOUT_MS)) as PodStatusDoc;
}

async function writeRegistryStatus(
  deps: ReconcileDeps,
  rp: RegistryPlan,
  reports: PodReport[],
  secrets: ReadonlyMap<string, Record<string, string>>,
  extensions: ConditionInput[],
  /** `rp.refusal` is a wait that ends by itself. */
  pending: boolean,
  now: Date,
): Promise<void> {
  const registry = rp.registry;
  const deployment = await deps.kube.deployment(registry.metadata.namespace, registry.metadata.name);
  const ready = deployment?.status?.readyReplicas ?? 0;
  const checksum = rp.config ? configChecksum(rp.config, secrets) : registry.status?.configChecksum;
  const rolledOut = deployment?.spec?.template?.metadata?.annotations?.[CHECKSUM_ANNOTATION] === checksum && (deployment?.status?.updatedReplicas ?? 0) === (deployment?.spec?.replicas ?? 0);
  let conditions: ConditionInput[];
  if (rp.refusal && pending) {
    conditions = [
      { type: 'Ready', status: 'False', reason: rp.refusal.reason, message: rp.refusal.message },
      { type: 'Reconciling', status: 'True', reason: rp.refusal.reason, message: rp.refusal.message },
      { type: 'Stalled', status: 'False', reason: rp.refusal.reason, message: 'waiting for it' },
    ];
  } else if (rp.refusal) {
    conditions = [
      { type: 'Ready', status: 'False', reason: rp.refusal.reason, message: rp.refusal.message },
      { type: 'Reconciling', status: 'False', reason: rp.refusal.reason, message: 'waiting for a change to the resources' },
      { type: 'Stalled', status: 'True', reason: rp.refusal.reason, message: rp.refusal.message },
    ];
  } else if (ready === 0 || reports.every((r) => r.doc === null)) {
    const message = `no ready pods${deployment ? ` (${deployment.status?.replicas ?? 0} of ${deployment.spec?.replicas ?? 0} running)` : ''}`;
    conditions = [
      { type: 'Ready', status: 'False', reason: 'NoReadyPods', message },
      { type: 'Reconciling', status: 'True', reason: 'NoReadyPods', message },
      { type: 'Stalled', status: 'False', reason: 'NoReadyPods', message: 'waiting for pods' },
    ];
  } else if (!rolledOut) {
    conditions = [
      { type: 'Ready', status: 'False', reason: 'RollingOut', message: `the pods are rolling to the new config (${ready} ready)` },
      { type: 'Reconciling', status: 'True', reason: 'RollingOut', message: 'rolling out' },
      { type: 'Stalled', status: 'False', reason: 'RollingOut', message: 'rolling out' },
    ];
  } else {
    conditions = [
      { type: 'Ready', status: 'True', reason: 'Serving', message: `${ready} ready pod${ready === 1 ? '' : 's'} at ${registryUrl(registry)}` },
      { type: 'Reconciling', status: 'False', reason: 'Serving', message: 'up to date' },
      { type: 'Stalled', status: 'False', reason: 'Serving', message: 'up to date' },
    ];
  }
  if (rp.mirror && !rp.refusal) conditions.push(nodeMirrorCondition(rp.mirror));
  conditions.push(...extensions);
  const status: PackageRegistryStatus = {
    replicas: deployment?.status?.replicas ?? 0,
    readyReplicas: ready,
    indexes: rp.served.length,
    url: registryUrl(registry),
    ...(checksum ? { configChecksum: checksum } : {}),
    ...versionOver(registry.status?.version, runningVersions(reports)),
    ...overPrevious(registry.status, registryStored(reports)),
  };
  await writeStatus(deps, 'PackageRegistry', registry, { status, conditions }, now);
}

/** The version to show: the pods' now, or while none answers the last one seen. */
function versionOver(previous: string | undefined, now: string | undefined): { version?: string } {
  const version = now ?? previous;
  return version !== undefined ? { version } : {};
}

type Owner = PackageIndex | PackageRegistry;

/** Writes status (with `observedGeneration` and merged conditions) only when it differs. */
async function writeStatus(
  deps: ReconcileDeps,
  kind: 'PackageIndex' | 'PackageRegistry',
  obj: Owner,
  state: { status: Omit<PackageIndexStatus & PackageRegistryStatus, 'conditions'>; conditions: ConditionInput[] },
  now: Date,
): Promise<void> {
  const generation = obj.metadata.generation;
  const previous: Condition[] | undefined = obj.status?.conditions;
  const status = { ...state.status, ...(generation !== undefined ? { observedGeneration: generation } : {}), conditions: nextConditions(previous, state.conditions, generation, now) };
  if (sameStatus(obj.status, status)) return;
  await deps.kube.patchStatus(kind, obj.metadata.namespace, obj.metadata.name, status);
  deps.log?.('status written', { kind, namespace: obj.metadata.namespace, name: obj.metadata.name, ready: status.conditions.find((c) => c.type === 'Ready')?.status });
}

function sameStatus(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeys(a ?? {})) === JSON.stringify(sortKeys(b));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([x], [y]) => (x < y ? -1 : 1)).map(([k, x]) => [k, sortKeys(x)]));
  return v;
}
