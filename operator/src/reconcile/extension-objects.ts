/**
 * A registry's objects of kinds other projects define (render/extension-kinds.ts): its HTTPRoute
 * (`spec.gatewayRoute`) and its Certificate (`spec.tls.certManager`). Each is applied only when the
 * API server serves its kind; when it does not, the registry's condition of that name says so and
 * what to install (status/extension-conditions.ts), and everything else is reconciled as usual.
 * Once the CRDs are installed, the next reconcile (a resync at the latest) applies the object.
 *
 * The Certificate is applied even while the registry cannot run: its Secret, which the registry
 * waits for, is what the Certificate makes. The HTTPRoute goes with the registry's other objects.
 */
import type { Kube } from '../kube/client.js';
import { certificate } from '../render/certificate.js';
import { httpRoute } from '../render/gateway-route.js';
import type { ApplyObject } from '../render/objects.js';
import type { PackageRegistry } from '../resources/types.js';
import type { ConditionInput } from '../status/conditions.js';
import { certificateCondition, certManagerMissing, gatewayApiMissing, gatewayRouteApplied } from '../status/extension-conditions.js';

interface Wanted {
  object: ApplyObject;
  /** The condition once applied, from the object as the API server returned it. */
  applied: (status: unknown) => ConditionInput;
  /** The condition when the API server does not serve its kind. */
  missing: ConditionInput;
}

/**
 * Applies the extension objects `registry` wants where their kinds are served, and returns their
 * conditions. `withWorkload`: the registry's other objects are applied in this reconcile too.
 */
export async function applyExtensionObjects(kube: Pick<Kube, 'apply' | 'serves'>, registry: PackageRegistry, withWorkload: boolean): Promise<ConditionInput[]> {
  const conditions: ConditionInput[] = [];
  for (const w of wanted(registry, withWorkload)) {
    if (await kube.serves(w.object.apiVersion, w.object.kind)) conditions.push(w.applied((await kube.apply(w.object)).status));
    else conditions.push(w.missing);
  }
  return conditions;
}

function wanted(registry: PackageRegistry, withWorkload: boolean): Wanted[] {
  const out: Wanted[] = [];
  const tls = registry.spec.tls;
  if (tls?.certManager) {
    const cm = tls.certManager;
    out.push({ object: certificate(registry, tls.secretName, cm), applied: (status) => certificateCondition(registry, tls.secretName, cm, status), missing: certManagerMissing(tls.secretName) });
  }
  const route = registry.spec.gatewayRoute;
  if (route && withWorkload) out.push({ object: httpRoute(registry, route), applied: () => gatewayRouteApplied(registry, route), missing: gatewayApiMissing(route) });
  return out;
}
