/**
 * The Kubernetes objects of one PackageRegistry: a ConfigMap with its TOML, a ServiceAccount of its
 * own for its pods, a Deployment of stateless registry pods, a Service and a PodDisruptionBudget,
 * each owned by the registry (so deleting it deletes them) and applied by server-side apply under
 * the operator's field manager.
 *
 * The pods mount their ServiceAccount's token only when an index takes ServiceAccount tokens
 * (`RenderedConfig.serviceAccounts`): they read the cluster's issuer with it (its discovery
 * document and keys, which the ClusterRole `system:service-account-issuer-discovery` opens; the
 * chart binds it, charts/velodex/templates/rbac.yaml). The ServiceAccount is the registry's own,
 * not the namespace's `default`, so that token carries whatever the cluster grants that account
 * and nothing granted to the other workloads of the namespace.
 *
 * The pod template carries a checksum of the config and of the content of every Secret it mounts:
 * editing an index or rotating a token changes it, and the Deployment rolls the pods. The
 * certificate Secret of `spec.tls` is the exception: the pods re-read it (tls/reload.ts), so a
 * renewal (cert-manager's, every few weeks) changes no checksum and rolls nothing.
 *
 * With `spec.tls` the container port is `https`, the probes use HTTPS, and the Service's default
 * port is 443.
 */
import { createHash } from 'node:crypto';
import type { RenderedConfig } from './registry-config.js';
import { DATA_DIR, REGISTRY_PORT, SECRETS_DIR, TLS_DIR } from './registry-config.js';
import { scratchLimit } from './scratch.js';
import { API_VERSION, type PackageRegistry, type RegistryAutoscaling, type RegistryIngress, type RegistryNetworkPolicy } from '../resources/types.js';
import type { SecretsByName } from '../plan/plan.js';
import { CERTIFICATE, HTTP_ROUTE } from './extension-kinds.js';

export const FIELD_MANAGER = 'velodex-operator';
export const CHECKSUM_ANNOTATION = 'velodex.dev/config-checksum';
export const CONFIG_KEY = 'velodex.toml';
const CONFIG_DIR = '/etc/velodex';
export const DEFAULT_REPLICAS = 2;
export const DEFAULT_SERVICE_PORT = 80;
export const DEFAULT_TLS_SERVICE_PORT = 443;
/** What a registry pod asks for unless `spec.resources` says otherwise: what the autoscaler's percentages are of. */
export const DEFAULT_RESOURCES = { requests: { cpu: '250m', memory: '256Mi' } };
export const DEFAULT_TARGET_CPU_PERCENT = 70;
export { DEFAULT_SCRATCH_LIMIT_BYTES, scratchLimit } from './scratch.js';

/** The Service's port: as the spec says, or the default of its scheme. */
export function servicePort(registry: PackageRegistry): number {
  return registry.spec.service?.port ?? (registry.spec.tls ? DEFAULT_TLS_SERVICE_PORT : DEFAULT_SERVICE_PORT);
}

/** JSON objects as the API takes them; typed loosely on purpose (server-side apply bodies). */
export type ApplyObject = Record<string, unknown> & { apiVersion: string; kind: string; metadata: { name: string; namespace: string } & Record<string, unknown> };

export interface RenderOptions {
  /** The image when the registry names none: the operator's own (one image runs both). */
  defaultImage: string;
}

/** Every registry pod carries `NAME_LABEL=velodex` and `INSTANCE_LABEL=<its registry's name>`. */
export const NAME_LABEL = 'app.kubernetes.io/name';
export const INSTANCE_LABEL = 'app.kubernetes.io/instance';
/** The selector of the operator's pod watch: every registry pod of every namespace. */
export const REGISTRY_POD_SELECTOR = `${NAME_LABEL}=velodex`;

export function labelsOf(registry: PackageRegistry): Record<string, string> {
  return {
    [NAME_LABEL]: 'velodex',
    [INSTANCE_LABEL]: registry.metadata.name,
    'app.kubernetes.io/component': 'registry',
    'app.kubernetes.io/managed-by': FIELD_MANAGER,
  };
}

/**
 * `[storage] peer_cache`: each process's invalidation listener binds the pod's own IP, where the
 * other pods reach it (the registry's default, 127.0.0.1, is reachable from its own pod only).
 */
const PEER_HOST_ENV = { name: 'VELODEX_PEER_HOST', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } };

/** Pods of a registry are selected by these (a subset of `labelsOf`, which never changes). */
export function selectorOf(registry: PackageRegistry): Record<string, string> {
  return { [NAME_LABEL]: 'velodex', [INSTANCE_LABEL]: registry.metadata.name };
}

export const configMapName = (registry: PackageRegistry) => `${registry.metadata.name}-config`;
/** The registry pods' ServiceAccount. */
export const serviceAccountName = (registry: PackageRegistry) => `velodex-${registry.metadata.name}`;

/** sha256 of the TOML and of every mounted Secret's keys and values (sorted): what the pods read. */
export function configChecksum(config: RenderedConfig, secrets: SecretsByName): string {
  const hash = createHash('sha256').update(config.toml);
  for (const name of config.secrets) {
    const data = secrets.get(name) ?? {};
    hash.update(`\0secret\0${name}`);
    for (const key of Object.keys(data).sort()) hash.update(`\0${key}\0${data[key] ?? ''}`);
  }
  return hash.digest('hex');
}

/** An object of the registry: in its namespace, with its labels, owned by it (deleted with it). */
export function owned(registry: PackageRegistry, kind: string, apiVersion: string, name: string): ApplyObject {
  return {
    apiVersion,
    kind,
    metadata: {
      name,
      namespace: registry.metadata.namespace,
      labels: labelsOf(registry),
      ownerReferences: [
        { apiVersion: API_VERSION, kind: 'PackageRegistry', name: registry.metadata.name, uid: registry.metadata.uid ?? '', controller: true, blockOwnerDeletion: true },
      ],
    },
  };
}


/** One pod per node, then per zone, where the scheduler can: never a reason not to schedule. */
function defaultSpread(registry: PackageRegistry): Record<string, unknown>[] {
  return ['kubernetes.io/hostname', 'topology.kubernetes.io/zone'].map((topologyKey) => ({
    maxSkew: 1,
    topologyKey,
    whenUnsatisfiable: 'ScheduleAnyway',
    labelSelector: { matchLabels: selectorOf(registry) },
  }));
}

/** The objects a registry has only when its spec asks for them: removed when it no longer does. */
export function optionalObjects(registry: PackageRegistry): { kind: string; apiVersion: string; name: string; wanted: boolean }[] {
  return [
    { kind: 'HorizontalPodAutoscaler', apiVersion: 'autoscaling/v2', name: registry.metadata.name, wanted: registry.spec.autoscaling !== undefined },
    { kind: 'NetworkPolicy', apiVersion: 'networking.k8s.io/v1', name: registry.metadata.name, wanted: registry.spec.networkPolicy !== undefined },
    { kind: 'Ingress', apiVersion: 'networking.k8s.io/v1', name: registry.metadata.name, wanted: registry.spec.ingress !== undefined },
    // Kinds of other projects, which the cluster may not serve (kube/client.ts `remove`).
    { ...HTTP_ROUTE, name: registry.metadata.name, wanted: registry.spec.gatewayRoute !== undefined },
    { ...CERTIFICATE, name: registry.metadata.name, wanted: registry.spec.tls?.certManager !== undefined },
  ];
}

export function renderObjects(registry: PackageRegistry, config: RenderedConfig, secrets: SecretsByName, opts: RenderOptions): ApplyObject[] {
  const name = registry.metadata.name;
  const spec = registry.spec;
  const checksum = configChecksum(config, secrets);
  const configMap = { ...owned(registry, 'ConfigMap', 'v1', configMapName(registry)), data: { [CONFIG_KEY]: config.toml } };
  // Nothing mounts its token by default: the pod template says when (below).
  const serviceAccount = { ...owned(registry, 'ServiceAccount', 'v1', serviceAccountName(registry)), automountServiceAccountToken: false };

  const secretVolumes = config.secrets.map((secret, i) => ({ name: `secret-${i}`, secret: { secretName: secret, defaultMode: 0o400 } }));
  const secretMounts = config.secrets.map((secret, i) => ({ name: `secret-${i}`, mountPath: `${SECRETS_DIR}/${secret}`, readOnly: true }));
  const tls = spec.tls;
  const port = tls ? 'https' : 'http';
  const probe = (path: string, period: number) => ({ httpGet: { path, port, scheme: tls ? 'HTTPS' : 'HTTP' }, periodSeconds: period, timeoutSeconds: 2 });
  const tlsVolumes = tls ? [{ name: 'tls', secret: { secretName: tls.secretName, defaultMode: 0o400 } }] : [];
  const tlsMounts = tls ? [{ name: 'tls', mountPath: TLS_DIR, readOnly: true }] : [];
  const deployment = {
    ...owned(registry, 'Deployment', 'apps/v1', name),
    spec: {
      // With an autoscaler the replica count is its: not applied here at all.
      ...(spec.autoscaling ? {} : { replicas: spec.replicas ?? DEFAULT_REPLICAS }),
      selector: { matchLabels: selectorOf(registry) },
      // A roll starts a new pod before it stops an old one, so serving never pauses.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: { labels: labelsOf(registry), annotations: { [CHECKSUM_ANNOTATION]: checksum } },
        spec: {
          serviceAccountName: serviceAccountName(registry),
          // The token, the CA and the namespace at /var/run/secrets/kubernetes.io/serviceaccount,
          // where the registry's [kubernetes] defaults look (a projected token the kubelet renews).
          automountServiceAccountToken: config.serviceAccounts,
          // A pod told to stop keeps serving while the endpoints that still name it are updated
          // (preStop sleep), then finishes its requests in flight (SIGTERM closes gracefully).
          terminationGracePeriodSeconds: 30,
          enableServiceLinks: false,
          topologySpreadConstraints: (spec.topologySpreadConstraints ?? defaultSpread(registry)).map((c) => ({ labelSelector: { matchLabels: selectorOf(registry) }, ...c })),
          securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'velodex',
              image: spec.image ?? opts.defaultImage,
              ...(spec.imagePullPolicy ? { imagePullPolicy: spec.imagePullPolicy } : {}),
              args: ['serve', '--config', `${CONFIG_DIR}/${CONFIG_KEY}`],
              ports: [{ name: port, containerPort: REGISTRY_PORT, protocol: 'TCP' }],
              env: [{ name: 'TMPDIR', value: `${DATA_DIR}/tmp` }, ...(spec.storage.peerCache ? [PEER_HOST_ENV] : [])],
              lifecycle: { preStop: { sleep: { seconds: 5 } } },
              readinessProbe: probe('/healthz', 2),
              livenessProbe: { ...probe('/healthz', 10), failureThreshold: 6 },
              resources: spec.resources ?? DEFAULT_RESOURCES,
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
              volumeMounts: [
                { name: 'config', mountPath: CONFIG_DIR, readOnly: true },
                { name: 'data', mountPath: DATA_DIR },
                ...secretMounts,
                ...tlsMounts,
              ],
            },
          ],
          volumes: [{ name: 'config', configMap: { name: configMapName(registry) } }, { name: 'data', emptyDir: { sizeLimit: scratchLimit(registry, config.largestFile) } }, ...secretVolumes, ...tlsVolumes],
        },
      },
    },
  };
  const service = {
    ...owned(registry, 'Service', 'v1', name),
    spec: {
      type: spec.service?.type ?? 'ClusterIP',
      selector: selectorOf(registry),
      ports: [{ name: port, port: servicePort(registry), targetPort: port, protocol: 'TCP', appProtocol: port }],
    },
  };
  const pdb = {
    ...owned(registry, 'PodDisruptionBudget', 'policy/v1', name),
    spec: { maxUnavailable: 1, selector: { matchLabels: selectorOf(registry) } },
  };
  const objects: ApplyObject[] = [configMap, serviceAccount, deployment, service, pdb];
  if (spec.autoscaling) objects.push(autoscaler(registry, spec.autoscaling));
  if (spec.networkPolicy) objects.push(networkPolicy(registry, spec.networkPolicy, port, spec.storage.peerCache === true));
  if (spec.ingress) objects.push(ingress(registry, spec.ingress, port));
  return objects;
}

/** Every path of `host` to the registry's Service port; TLS with the named Secret when given. */
function ingress(registry: PackageRegistry, i: RegistryIngress, port: string): ApplyObject {
  const base = owned(registry, 'Ingress', 'networking.k8s.io/v1', registry.metadata.name);
  return {
    ...base,
    metadata: { ...base.metadata, ...(i.annotations ? { annotations: i.annotations } : {}) },
    spec: {
      ...(i.className ? { ingressClassName: i.className } : {}),
      ...(i.tlsSecretName ? { tls: [{ hosts: [i.host], secretName: i.tlsSecretName }] } : {}),
      rules: [{ host: i.host, http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: registry.metadata.name, port: { name: port } } } }] } }],
    },
  };
}

function autoscaler(registry: PackageRegistry, a: RegistryAutoscaling): ApplyObject {
  return {
    ...owned(registry, 'HorizontalPodAutoscaler', 'autoscaling/v2', registry.metadata.name),
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: registry.metadata.name },
      minReplicas: a.minReplicas ?? DEFAULT_REPLICAS,
      maxReplicas: a.maxReplicas,
      metrics: [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: a.targetCPUUtilizationPercentage ?? DEFAULT_TARGET_CPU_PERCENT } } }],
    },
  };
}

/**
 * Ingress to the registry port from `from` (default: every pod of the cluster); egress to DNS and
 * to `egress` (default: anywhere, since the object store and the upstreams may be outside).
 *
 * With `peerCache` the registry's own pods may also reach each other on any TCP port, both ways:
 * each process's invalidation listener takes a free port, and a write that cannot reach a pod
 * waits out that pod's lease (storage/peers/members.ts), so a blocked pod would slow every write.
 */
function networkPolicy(registry: PackageRegistry, p: RegistryNetworkPolicy, port: string, peerCache: boolean): ApplyObject {
  const dns = { to: [{ namespaceSelector: {} }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] };
  const ownPods = [{ podSelector: { matchLabels: selectorOf(registry) } }];
  const anyTcp = [{ protocol: 'TCP' }];
  const egress = p.egress ? [dns, { to: p.egress }, ...(peerCache ? [{ to: ownPods, ports: anyTcp }] : [])] : [{}];
  return {
    ...owned(registry, 'NetworkPolicy', 'networking.k8s.io/v1', registry.metadata.name),
    spec: {
      podSelector: { matchLabels: selectorOf(registry) },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ from: p.from ?? [{ namespaceSelector: {} }], ports: [{ protocol: 'TCP', port }] }, ...(peerCache ? [{ from: ownPods, ports: anyTcp }] : [])],
      egress,
    },
  };
}
