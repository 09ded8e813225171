/**
 * `spec.tls.certManager` as a cert-manager Certificate that fills the Secret of `spec.tls`. Its
 * `secretTemplate` labels that Secret velodex.dev/allow-reference=true, so the operator, which
 * watches labelled Secrets only, sees it appear and start the pods on it, and sees each renewal
 * (which the pods re-read without a roll, render/objects.ts).
 */
import { SECRET_OPT_IN_LABEL, SECRET_OPT_IN_VALUE } from '../plan/secret-refs.js';
import type { PackageRegistry, RegistryCertManager } from '../resources/types.js';
import { CERTIFICATE } from './extension-kinds.js';
import { owned, type ApplyObject } from './objects.js';
import { externalHost } from './registry-config.js';

/**
 * The names the certificate is for: as the spec says, or every name a client in the cluster
 * reaches the Service by, and the external host where one is declared.
 */
export function certificateDnsNames(registry: PackageRegistry, cm: RegistryCertManager): string[] {
  if (cm.dnsNames) return cm.dnsNames;
  const { name, namespace } = registry.metadata;
  const host = externalHost(registry);
  return [name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`, ...(host ? [host] : [])];
}

export function certificate(registry: PackageRegistry, secretName: string, cm: RegistryCertManager): ApplyObject {
  return {
    ...owned(registry, CERTIFICATE.kind, CERTIFICATE.apiVersion, registry.metadata.name),
    spec: {
      secretName,
      secretTemplate: { labels: { [SECRET_OPT_IN_LABEL]: SECRET_OPT_IN_VALUE } },
      issuerRef: { group: 'cert-manager.io', kind: cm.issuerRef.kind ?? 'Issuer', name: cm.issuerRef.name },
      dnsNames: certificateDnsNames(registry, cm),
    },
  };
}
