/**
 * The API calls the operator makes besides its informers' lists and watches (kube/informers.ts),
 * in one place: the list an informer of its custom resources starts from; whether a Secret exists,
 * asked as a table row, never its data; the Deployment just applied; whether a kind is served
 * (discovery); server-side apply of rendered objects under the operator's field manager; merge
 * patches of the status subresource.
 * @kubernetes/client-node 1.4 (2.x needs Node 22): methods take one object, and a patch needs its
 * content type set explicitly.
 */
import http from 'node:http';
import https from 'node:https';
import {
  AppsV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1Deployment,
} from '@kubernetes/client-node';
// Not re-exported by the package's index; 1.4.x is pinned (package.json), and the render tests
// through a real API server (test/operator/apiserver.test.ts) fail if this path or its behaviour moves.
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { FIELD_MANAGER, type ApplyObject } from '../render/objects.js';
import { GROUP, VERSION, type PackageIndexStatus, type PackageRegistryStatus } from '../resources/types.js';

/** Asks the API server for a list as a table (`kubectl get`'s columns); `includeObject=None` leaves the objects out. */
const TABLE_WITHOUT_OBJECTS = 'application/json;as=Table;g=meta.k8s.io;v=v1';
const GET_TIMEOUT_MS = 30_000;

export const PLURAL = { PackageIndex: 'packageindexes', PackageRegistry: 'packageregistries' } as const;

export interface Kube {
  config: KubeConfig;
  /** A custom resource list across namespaces, as an informer lists it. */
  listAll(plural: string): Promise<{ metadata?: { resourceVersion?: string }; items: KubernetesObject[] }>;
  /** Whether a Secret of that name exists, asked for its metadata only: its data is never read. */
  secretExists(namespace: string, name: string): Promise<boolean>;
  deployment(namespace: string, name: string): Promise<V1Deployment | null>;
  /** Server-side apply; the object as the API server now has it, status included. */
  apply(obj: ApplyObject): Promise<KubernetesObject & { status?: unknown }>;
  /**
   * Deletes an object the operator applied earlier and no longer wants; nothing when it is gone
   * already, or when the API server does not serve its kind (a CRD never installed, or removed).
   */
  remove(ref: { apiVersion: string; kind: string; namespace: string; name: string }): Promise<void>;
  /** Whether the API server serves this kind (its discovery lists it): a CRD's kind only once the CRD is installed. */
  serves(apiVersion: string, kind: string): Promise<boolean>;
  patchStatus(kind: keyof typeof PLURAL, namespace: string, name: string, status: PackageIndexStatus | PackageRegistryStatus): Promise<void>;
}

export function loadKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}

export function kubeClient(kc: KubeConfig): Kube {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const apps = kc.makeApiClient(AppsV1Api);
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const serves = async (apiVersion: string, kind: string): Promise<boolean> => {
    const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    try {
      const list = (await getJson(kc, path, 'application/json')) as { resources?: { kind?: string; name?: string }[] };
      // Subresources (`httproutes/status`) carry their parent's kind: only the resource itself counts.
      return (list.resources ?? []).some((r) => r.kind === kind && !(r.name ?? '').includes('/'));
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  };
  return {
    config: kc,
    listAll: async (plural) => (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural })) as { items: KubernetesObject[] },
    async secretExists(namespace, name) {
      // Not a Secret name (a DNS subdomain): no such Secret, and nothing to put in a selector.
      if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name)) return false;
      // A list by name (the operator may list, not get, Secrets) answered as a table without the
      // objects: a row says it exists. Not even metadata: `kubectl apply` keeps a Secret's whole
      // manifest, values included, in its last-applied-configuration annotation.
      const query = new URLSearchParams({ fieldSelector: `metadata.name=${name}`, includeObject: 'None' });
      const table = (await getJson(kc, `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets?${query}`, TABLE_WITHOUT_OBJECTS)) as { rows?: unknown[] | null };
      return (table.rows ?? []).length > 0;
    },
    async deployment(namespace, name) {
      try {
        return await apps.readNamespacedDeployment({ namespace, name });
      } catch (err) {
        if (isNotFound(err)) return null;
        throw err;
      }
    },
    async apply(obj) {
      return (await objects.patch(asModel(obj), undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply)) as KubernetesObject & { status?: unknown };
    },
    async remove({ apiVersion, kind, namespace, name }) {
      // Asked first: the library's delete of a kind it cannot find in discovery throws a plain
      // Error (no 404 code) when the group is served but not that kind.
      if (!(await serves(apiVersion, kind))) return;
      try {
        await objects.delete({ apiVersion, kind, metadata: { namespace, name } });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    },
    serves,
    async patchStatus(kind, namespace, name, status) {
      await custom.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace, plural: PLURAL[kind], name, body: { status }, fieldManager: FIELD_MANAGER },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    },
  };
}

/**
 * The library sends a kind it knows by its model's property names, which differ from the API's
 * where the API's is a reserved word (a NetworkPolicy peer list is `_from` there, `from` on the
 * wire): a rendered object, written in the API's names, would lose such fields without a word.
 * Read into the model first, it is sent as written. A kind the library does not know (a custom
 * resource) passes through unchanged.
 */
function asModel(obj: ApplyObject): KubernetesObject {
  const version = obj.apiVersion.split('/').pop() ?? obj.apiVersion;
  const type = `${version.charAt(0).toUpperCase()}${version.slice(1)}${obj.kind}`;
  return ObjectSerializer.deserialize(obj, type, '') as KubernetesObject;
}

/**
 * A GET the generated clients cannot make (a table without objects), with the kubeconfig's
 * credentials and TLS settings; a status other than 200 is an error carrying its `code`.
 */
async function getJson(kc: KubeConfig, path: string, accept: string): Promise<unknown> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig names no cluster');
  const url = new URL(path, server);
  const opts: https.RequestOptions = { method: 'GET', headers: { Accept: accept }, timeout: GET_TIMEOUT_MS };
  await kc.applyToHTTPSOptions(opts);
  return new Promise((resolve, reject) => {
    const req = (url.protocol === 'https:' ? https : http).request(url, opts, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode !== 200) return reject(Object.assign(new Error(`GET ${url.pathname} answered ${res.statusCode ?? 0}`), { code: res.statusCode }));
        try {
          resolve(JSON.parse(text));
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url.pathname} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

export function isNotFound(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: number }).code === 404;
}
