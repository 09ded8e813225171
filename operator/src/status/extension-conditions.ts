/**
 * The `GatewayRoute` and `Certificate` conditions of a PackageRegistry whose spec asks for an
 * HTTPRoute or a cert-manager Certificate (reconcile/extension-objects.ts):
 *
 *   GatewayRoute  True Applied; False GatewayAPIMissing (the cluster serves no HTTPRoute).
 *   Certificate   True Issued, False NotIssued (cert-manager's own Ready condition, its reason and
 *                 message passed on), Unknown Requested (cert-manager has said nothing yet);
 *                 False CertManagerMissing (the cluster serves no Certificate).
 *
 * What cert-manager says is read from the Certificate as the apply returns it: a reconcile (an
 * event, or the resync) brings it up to date.
 */
import { SECRET_OPT_IN_SELECTOR } from '../plan/secret-refs.js';
import { certificateDnsNames } from '../render/certificate.js';
import { CERTIFICATE, HTTP_ROUTE } from '../render/extension-kinds.js';
import { servicePort } from '../render/objects.js';
import type { PackageRegistry, RegistryCertManager, RegistryGatewayRoute } from '../resources/types.js';
import type { ConditionInput } from './conditions.js';

export function gatewayRouteApplied(registry: PackageRegistry, route: RegistryGatewayRoute): ConditionInput {
  const { name, namespace } = registry.metadata;
  const parents = route.parentRefs.map((p) => `${p.namespace ?? namespace}/${p.name}${p.sectionName ? `/${p.sectionName}` : ''}`).join(', ');
  return { type: 'GatewayRoute', status: 'True', reason: 'Applied', message: `HTTPRoute "${name}" sends ${route.host} to Service "${name}" port ${servicePort(registry)} through Gateway ${parents}` };
}

export function gatewayApiMissing(route: RegistryGatewayRoute): ConditionInput {
  return {
    type: 'GatewayRoute',
    status: 'False',
    reason: 'GatewayAPIMissing',
    message:
      `this cluster does not serve ${HTTP_ROUTE.kind} (${HTTP_ROUTE.apiVersion}), so ${route.host} does not reach the registry: install the Gateway API's CRDs (standard channel) ` +
      `and a Gateway controller, or expose the registry with spec.ingress instead; the registry serves inside the cluster all the same`,
  };
}

export function certManagerMissing(secretName: string): ConditionInput {
  return {
    type: 'Certificate',
    status: 'False',
    reason: 'CertManagerMissing',
    message:
      `this cluster does not serve ${CERTIFICATE.kind} (${CERTIFICATE.apiVersion}), so no certificate is requested: install cert-manager, ` +
      `or drop spec.tls.certManager and create the kubernetes.io/tls Secret "${secretName}" yourself, labelled ${SECRET_OPT_IN_SELECTOR}`,
  };
}

interface CertManagerStatus {
  conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
  notAfter?: string;
}

/** The condition from the Certificate's status as cert-manager writes it (`status` as applied). */
export function certificateCondition(registry: PackageRegistry, secretName: string, cm: RegistryCertManager, status: unknown): ConditionInput {
  const name = registry.metadata.name;
  const issuer = `${cm.issuerRef.kind ?? 'Issuer'} "${cm.issuerRef.name}"`;
  const ready = (status as CertManagerStatus | undefined)?.conditions?.find((c) => c.type === 'Ready');
  const look = `kubectl describe certificate ${name} -n ${registry.metadata.namespace}`;
  if (ready?.status === 'True') {
    const until = (status as CertManagerStatus).notAfter;
    return {
      type: 'Certificate',
      status: 'True',
      reason: 'Issued',
      message: `Certificate "${name}" from ${issuer} is issued into Secret "${secretName}"${until ? `, valid until ${until}` : ''}; cert-manager renews it, and the pods serve each renewal without a roll`,
    };
  }
  if (ready?.status === 'False') {
    return { type: 'Certificate', status: 'False', reason: 'NotIssued', message: `Certificate "${name}" from ${issuer} is not issued: ${ready.reason ?? 'NotReady'}: ${ready.message ?? ''} (${look})` };
  }
  return {
    type: 'Certificate',
    status: 'Unknown',
    reason: 'Requested',
    message: `Certificate "${name}" asks ${issuer} for Secret "${secretName}" (${certificateDnsNames(registry, cm).join(', ')}); the pods serve it once cert-manager has filled it (${look})`,
  };
}
