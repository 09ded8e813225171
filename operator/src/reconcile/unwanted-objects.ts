/**
 * The optional objects of a registry (its autoscaler, NetworkPolicy, Ingress, HTTPRoute and
 * Certificate: render/objects.ts `optionalObjects`) that its spec no longer asks for: applying
 * never deletes anything, so they are deleted here. Each absence is confirmed once per operator
 * process (a DELETE, or its 404, or the API server not serving the kind at all: a CRD never
 * installed) and remembered until the spec asks for the object again, so a registry that never
 * had one costs no request per reconcile.
 */
import type { Kube } from '../kube/client.js';
import { optionalObjects } from '../render/objects.js';
import type { PackageRegistry } from '../resources/types.js';

export class UnwantedObjects {
  readonly #absent = new Set<string>();

  async remove(kube: Pick<Kube, 'remove'>, registry: PackageRegistry): Promise<void> {
    const { namespace, name } = registry.metadata;
    for (const o of optionalObjects(registry)) {
      const key = `${namespace}/${name}/${o.kind}`;
      if (o.wanted) {
        this.#absent.delete(key);
        continue;
      }
      if (this.#absent.has(key)) continue;
      await kube.remove({ apiVersion: o.apiVersion, kind: o.kind, namespace, name: o.name });
      this.#absent.add(key);
    }
  }
}
