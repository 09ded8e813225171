/**
 * The operator's view of the cluster: one informer (a list, then a watch that keeps its cache
 * current) per kind it reads, across namespaces. Reconciles read these caches; the API server is
 * asked again only for what a cache cannot answer (whether an unlabelled Secret exists, the
 * Deployment right after it was applied) and for writes.
 *
 * What is watched: PackageRegistries and PackageIndexes; Secrets labelled
 * `velodex.dev/allow-reference=true` only (plan/secret-refs.ts: the others are never listed,
 * watched or cached); registry pods (`app.kubernetes.io/name=velodex`).
 *
 * Events reach `onEvent` only once every cache has been listed (`start` resolves then), so a
 * reconcile never sees a half-filled view: Secrets missing because they were not listed yet would
 * read as "does not exist". A watch that fails is started again after a pause; it resumes where
 * it stopped, or lists again when the API server no longer has that point (410 Gone).
 */
import { CoreV1Api, ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject, type V1Pod, type V1Secret } from '@kubernetes/client-node';
import { SECRET_OPT_IN_SELECTOR } from '../plan/secret-refs.js';
import { REGISTRY_POD_SELECTOR } from '../render/objects.js';
import { GROUP, VERSION, type PackageIndex, type PackageRegistry } from '../resources/types.js';
import { PLURAL, type Kube } from './client.js';

const RESTART_WATCH_MS = 3_000;
const LIST_POLL_MS = 200;

/** What a reconcile reads of the cluster. `namespace` omitted: every namespace. */
export interface ClusterView {
  registries(namespace?: string): readonly PackageRegistry[];
  indexes(namespace?: string): readonly PackageIndex[];
  /** The opted-in Secrets of a namespace, decoded: name → key → value. */
  secrets(namespace: string): Map<string, Record<string, string>>;
  /** The pods of a namespace that carry every label of `selector`. */
  pods(namespace: string, selector: Readonly<Record<string, string>>): V1Pod[];
}

export type Verb = 'add' | 'update' | 'delete';

/** One change a watch reported, with the object as it is now (as it was last, for `delete`). */
export type WatchEvent =
  | { kind: 'PackageRegistry'; verb: Verb; object: PackageRegistry }
  | { kind: 'PackageIndex'; verb: Verb; object: PackageIndex }
  | { kind: 'Secret'; verb: Verb; object: V1Secret }
  | { kind: 'Pod'; verb: Verb; object: V1Pod };

export class Informers implements ClusterView {
  // The custom resources are cached as the API server sends them (JSON); ours are their types.
  readonly #registries: ListWatch<KubernetesObject>;
  readonly #indexes: ListWatch<KubernetesObject>;
  readonly #secrets: ListWatch<V1Secret>;
  readonly #pods: ListWatch<V1Pod>;
  #synced = false;
  #stopped = false;
  #listeners: Array<(event: WatchEvent) => void> = [];

  constructor(
    kc: KubeConfig,
    kube: Kube,
    private readonly log: (msg: string, fields?: Record<string, unknown>) => void,
  ) {
    const core = kc.makeApiClient(CoreV1Api);
    // What makeInformer builds, kept as a ListWatch: `latestResourceVersion` tells a cache that has listed.
    const informer = <T extends KubernetesObject>(path: string, list: () => Promise<KubernetesListObject<T>>, labelSelector?: string) =>
      new ListWatch<T>(path, new Watch(kc), list, false, labelSelector);
    const custom = (plural: string) => informer(`/apis/${GROUP}/${VERSION}/${plural}`, () => kube.listAll(plural));
    this.#registries = custom(PLURAL.PackageRegistry);
    this.#indexes = custom(PLURAL.PackageIndex);
    this.#secrets = informer('/api/v1/secrets', () => core.listSecretForAllNamespaces({ labelSelector: SECRET_OPT_IN_SELECTOR }), SECRET_OPT_IN_SELECTOR);
    this.#pods = informer('/api/v1/pods', () => core.listPodForAllNamespaces({ labelSelector: REGISTRY_POD_SELECTOR }), REGISTRY_POD_SELECTOR);
    this.#relay(this.#registries, (verb, o) => ({ kind: 'PackageRegistry', verb, object: o as unknown as PackageRegistry }));
    this.#relay(this.#indexes, (verb, o) => ({ kind: 'PackageIndex', verb, object: o as unknown as PackageIndex }));
    this.#relay(this.#secrets, (verb, object) => ({ kind: 'Secret', verb, object }));
    this.#relay(this.#pods, (verb, object) => ({ kind: 'Pod', verb, object }));
  }

  /** Calls `listener` with every change after `start` has filled the caches. */
  onEvent(listener: (event: WatchEvent) => void): void {
    this.#listeners.push(listener);
  }

  /** Lists every kind and starts its watch; resolves once all caches are filled. */
  async start(): Promise<void> {
    for (const informer of this.#all()) {
      await informer.start();
      // A list that failed was reported (and is retried after a pause, below): wait for one that worked.
      while (informer.latestResourceVersion() === '') {
        if (this.#stopped) return;
        await new Promise((resolve) => setTimeout(resolve, LIST_POLL_MS));
      }
    }
    this.#synced = true;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#all().map((i) => i.stop()));
  }

  registries(namespace?: string): readonly PackageRegistry[] {
    return this.#registries.list(namespace) as unknown as readonly PackageRegistry[];
  }

  indexes(namespace?: string): readonly PackageIndex[] {
    return this.#indexes.list(namespace) as unknown as readonly PackageIndex[];
  }

  secrets(namespace: string): Map<string, Record<string, string>> {
    const out = new Map<string, Record<string, string>>();
    for (const s of this.#secrets.list(namespace)) if (s.metadata?.name) out.set(s.metadata.name, decodeSecret(s));
    return out;
  }

  pods(namespace: string, selector: Readonly<Record<string, string>>): V1Pod[] {
    const wanted = Object.entries(selector);
    return this.#pods.list(namespace).filter((p) => wanted.every(([k, v]) => p.metadata?.labels?.[k] === v));
  }

  #all(): Array<ListWatch<KubernetesObject>> {
    return [this.#registries, this.#indexes, this.#secrets, this.#pods];
  }

  #relay<T extends KubernetesObject>(informer: ListWatch<T>, event: (verb: Verb, object: T) => WatchEvent): void {
    for (const verb of ['add', 'update', 'delete'] as const) {
      informer.on(verb, (object: T) => {
        if (!this.#synced) return;
        for (const listener of this.#listeners) listener(event(verb, object));
      });
    }
    informer.on('error', (err: unknown) => {
      if (this.#stopped) return;
      this.log('watch failed; restarting', { error: err instanceof Error ? err.message : String(err) });
      setTimeout(() => void informer.start().catch(() => undefined), RESTART_WATCH_MS);
    });
  }
}

/** A Secret's keys and values, decoded from base64. */
function decodeSecret(s: V1Secret): Record<string, string> {
  const data: Record<string, string> = {};
  for (const [k, v] of Object.entries(s.data ?? {})) data[k] = Buffer.from(v, 'base64').toString('utf8');
  for (const [k, v] of Object.entries(s.stringData ?? {})) data[k] = v;
  return data;
}
