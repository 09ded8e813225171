/**
 * A registry's objects of kinds other projects define (render/extension-kinds.ts): its HTTPRoute
 * (`spec.gatewayRoute`) and its Certificate (`spec.tls.certManager`). Each is applied only when the
 * API server serves its kind; when it does not, the registry's condition of that name says so and
 * what to install, and everything else is reconciled as usual. Once the CRDs are installed, the
 * next reconcile (a resync at the latest) applies the object.
 *
 * The Certificate is applied even while the registry cannot run: its Secret, which the registry
 * waits for, is what the Certificate makes. The HTTPRoute goes with the registry's other objects.
 */
import type { Kube } from '../kube/client.js';
import { SECRET_OPT_IN_SELECTOR } from '../plan/secret-refs.js';
import { certificate, certificateDnsNames } from '../render/certificate.js';
import { CERTIFICATE, HTTP_ROUTE } from '../render/extension-kinds.js';
import { httpRoute } from '../render/gateway-route.js';
import { servicePort, type ApplyObject } from '../render/objects.js';
import type { PackageRegistry } from '../resources/types.js';
import type { ConditionInput } from '../status/conditions.js';

interface Wanted {
  object: ApplyObject;
  /** The condition when it is applied. */
  applied: ConditionInput;
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
    if (await kube.serves(w.object.apiVersion, w.object.kind)) {
      await kube.apply(w.object);
      conditions.push(w.applied);
    } else {
      conditions.push(w.missing);
    }
  }
  return conditions;
}

function wanted(registry: PackageRegistry, withWorkload: boolean): Wanted[] {
  const { name, namespace } = registry.metadata;
  const out: Wanted[] = [];
  const tls = registry.spec.tls;
  if (tls?.certManager) {
    const cm = tls.certManager;
    const issuer = `${cm.issuerRef.kind ?? 'Issuer'} "${cm.issuerRef.name}"`;
    out.push({
      object: certificate(registry, tls.secretName, cm),
      applied: {
        type: 'Certificate',
        status: 'True',
        reason: 'Requested',
        message: `Certificate "${name}" asks ${issuer} for Secret "${tls.secretName}" (${certificateDnsNames(registry, cm).join(', ')}); the pods serve it once cert-manager has filled it, and each renewal without a roll (kubectl describe certificate ${name} -n ${namespace})`,
      },
      missing: {
        type: 'Certificate',
        status: 'False',
        reason: 'CertManagerMissing',
        message:
          `this cluster does not serve ${CERTIFICATE.kind} (${CERTIFICATE.apiVersion}), so no certificate is requested: install cert-manager, ` +
          `or drop spec.tls.certManager and create the kubernetes.io/tls Secret "${tls.secretName}" yourself, labelled ${SECRET_OPT_IN_SELECTOR}`,
      },
    });
  }
  const route = registry.spec.gatewayRoute;
  if (route && withWorkload) {
    const parents = route.parentRefs.map((p) => `${p.namespace ?? namespace}/${p.name}${p.sectionName ? `/${p.sectionName}` : ''}`).join(', ');
    out.push({
      object: httpRoute(registry, route),
      applied: { type: 'GatewayRoute', status: 'True', reason: 'Applied', message: `HTTPRoute "${name}" sends ${route.host} to Service "${name}" port ${servicePort(registry)} through Gateway ${parents}` },
      missing: {
        type: 'GatewayRoute',
        status: 'False',
        reason: 'GatewayAPIMissing',
        message:
          `this cluster does not serve ${HTTP_ROUTE.kind} (${HTTP_ROUTE.apiVersion}), so ${route.host} does not reach the registry: install the Gateway API's CRDs (standard channel) ` +
          `and a Gateway controller, or expose the registry with spec.ingress instead; the registry serves inside the cluster all the same`,
      },
    });
  }
  return out;
}
