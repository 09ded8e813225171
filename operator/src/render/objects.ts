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
 * editing an index or rotating a token changes it, and the Deployment rolls the pods.
 */
import { createHash } from 'node:crypto';
import type { RenderedConfig } from './registry-config.js';
import { DATA_DIR, REGISTRY_PORT, SECRETS_DIR } from './registry-config.js';
import { API_VERSION, type PackageRegistry } from '../resources/types.js';
import type { SecretsByName } from '../plan/plan.js';

export const FIELD_MANAGER = 'velodex-operator';
export const CHECKSUM_ANNOTATION = 'velodex.dev/config-checksum';
export const CONFIG_KEY = 'velodex.toml';
const CONFIG_DIR = '/etc/velodex';
export const DEFAULT_REPLICAS = 2;
export const DEFAULT_SERVICE_PORT = 80;

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

function owned(registry: PackageRegistry, kind: string, apiVersion: string, name: string): ApplyObject {
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

export function renderObjects(registry: PackageRegistry, config: RenderedConfig, secrets: SecretsByName, opts: RenderOptions): ApplyObject[] {
  const name = registry.metadata.name;
  const spec = registry.spec;
  const checksum = configChecksum(config, secrets);
  const configMap = { ...owned(registry, 'ConfigMap', 'v1', configMapName(registry)), data: { [CONFIG_KEY]: config.toml } };
  // Nothing mounts its token by default: the pod template says when (below).
  const serviceAccount = { ...owned(registry, 'ServiceAccount', 'v1', serviceAccountName(registry)), automountServiceAccountToken: false };

  const secretVolumes = config.secrets.map((secret, i) => ({ name: `secret-${i}`, secret: { secretName: secret, defaultMode: 0o400 } }));
  const secretMounts = config.secrets.map((secret, i) => ({ name: `secret-${i}`, mountPath: `${SECRETS_DIR}/${secret}`, readOnly: true }));
  const probe = (path: string, period: number) => ({ httpGet: { path, port: 'http' }, periodSeconds: period, timeoutSeconds: 2 });
  const deployment = {
    ...owned(registry, 'Deployment', 'apps/v1', name),
    spec: {
      replicas: spec.replicas ?? DEFAULT_REPLICAS,
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
          securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'velodex',
              image: spec.image ?? opts.defaultImage,
              ...(spec.imagePullPolicy ? { imagePullPolicy: spec.imagePullPolicy } : {}),
              args: ['serve', '--config', `${CONFIG_DIR}/${CONFIG_KEY}`],
              ports: [{ name: 'http', containerPort: REGISTRY_PORT, protocol: 'TCP' }],
              env: [{ name: 'TMPDIR', value: `${DATA_DIR}/tmp` }],
              lifecycle: { preStop: { sleep: { seconds: 5 } } },
              readinessProbe: probe('/healthz', 2),
              livenessProbe: { ...probe('/healthz', 10), failureThreshold: 6 },
              ...(spec.resources ? { resources: spec.resources } : {}),
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
              volumeMounts: [
                { name: 'config', mountPath: CONFIG_DIR, readOnly: true },
                { name: 'data', mountPath: DATA_DIR },
                ...secretMounts,
              ],
            },
          ],
          volumes: [{ name: 'config', configMap: { name: configMapName(registry) } }, { name: 'data', emptyDir: {} }, ...secretVolumes],
        },
      },
    },
  };
  const service = {
    ...owned(registry, 'Service', 'v1', name),
    spec: {
      type: spec.service?.type ?? 'ClusterIP',
      selector: selectorOf(registry),
      ports: [{ name: 'http', port: spec.service?.port ?? DEFAULT_SERVICE_PORT, targetPort: 'http', protocol: 'TCP' }],
    },
  };
  const pdb = {
    ...owned(registry, 'PodDisruptionBudget', 'policy/v1', name),
    spec: { maxUnavailable: 1, selector: { matchLabels: selectorOf(registry) } },
  };
  return [configMap, serviceAccount, deployment, service, pdb];
}
