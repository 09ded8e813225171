/**
 * The work queue's keys and what maps a watch event to them. A key is one registry,
 * `namespace/name`: its reconcile renders that PackageRegistry and writes the status of every
 * PackageIndex that names it (`spec.registry`), so a key whose registry does not exist still has
 * work: telling its indexes so. An event maps to the keys it affects, as controllers map the
 * objects they watch to the objects they own:
 *
 *   PackageRegistry  itself
 *   PackageIndex     its registry, and the one it named before when `spec.registry` changed
 *   Secret           every registry whose storage, or one of whose indexes, references it
 *   Pod              the registry named by its instance label, when that registry exists
 *
 * The informers hand over an object as it is now, not as it was, so where an index pointed
 * before is remembered here.
 */
import type { V1Pod, V1Secret } from '@kubernetes/client-node';
import type { ClusterView, WatchEvent } from '../kube/informers.js';
import { registryOf } from '../plan/plan.js';
import { indexSecretUses, registrySecretUses } from '../plan/secret-refs.js';
import { INSTANCE_LABEL } from '../render/objects.js';
import type { PackageIndex } from '../resources/types.js';

export function registryKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** Namespaces and Kubernetes names have no `/`, so the first one splits a key. */
export function splitKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf('/');
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

export class EventKeys {
  /** Index (`namespace/name`) → the registry key it last named. */
  readonly #homes = new Map<string, string>();

  constructor(private readonly view: Pick<ClusterView, 'registries' | 'indexes'>) {}

  /** Every key the caches hold (after the first list: nothing has been reconciled yet). */
  all(): Set<string> {
    const keys = new Set<string>();
    for (const r of this.view.registries()) keys.add(registryKey(r.metadata.namespace, r.metadata.name));
    for (const ix of this.view.indexes()) for (const key of this.#index(ix, false)) keys.add(key);
    return keys;
  }

  of(event: WatchEvent): string[] {
    switch (event.kind) {
      case 'PackageRegistry':
        return [registryKey(event.object.metadata.namespace, event.object.metadata.name)];
      case 'PackageIndex':
        return this.#index(event.object, event.verb === 'delete');
      case 'Secret':
        return this.#secret(event.object);
      case 'Pod':
        return this.#pod(event.object);
    }
  }

  #index(ix: PackageIndex, gone: boolean): string[] {
    const id = `${ix.metadata.namespace}/${ix.metadata.name}`;
    const key = registryKey(ix.metadata.namespace, registryOf(ix));
    const before = this.#homes.get(id);
    if (gone) this.#homes.delete(id);
    else this.#homes.set(id, key);
    return before !== undefined && before !== key ? [key, before] : [key];
  }

  #secret(secret: V1Secret): string[] {
    const namespace = secret.metadata?.namespace;
    const name = secret.metadata?.name;
    if (!namespace || !name) return [];
    const keys = new Set<string>();
    for (const r of this.view.registries(namespace)) {
      if (registrySecretUses(r).some((u) => u.ref.name === name)) keys.add(registryKey(namespace, r.metadata.name));
    }
    for (const ix of this.view.indexes(namespace)) {
      if (indexSecretUses(ix).some((u) => u.ref.name === name)) keys.add(registryKey(namespace, registryOf(ix)));
    }
    return [...keys];
  }

  #pod(pod: V1Pod): string[] {
    const namespace = pod.metadata?.namespace;
    const instance = pod.metadata?.labels?.[INSTANCE_LABEL];
    if (!namespace || !instance) return [];
    return this.view.registries(namespace).some((r) => r.metadata.name === instance) ? [registryKey(namespace, instance)] : [];
  }
}
