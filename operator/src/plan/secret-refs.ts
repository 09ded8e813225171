/**
 * Which Secrets the resources name, and the opt-in rule for them. A Secret is used by the
 * operator (read, mounted into registry pods, hashed into the pod checksum) only when it carries
 * the label `velodex.dev/allow-reference: "true"`. Without that rule anyone who may create a
 * PackageIndex could name any Secret of the namespace as upstream credentials or a webhook URL of
 * a receiver they control, and the registry would send its values there. The operator lists and
 * watches only labelled Secrets (kube/client.ts, main.ts), so the others never reach its memory.
 */
import { DEFAULT_ACCESS_KEY_KEY, DEFAULT_SECRET_KEY_KEY } from '../render/registry-config.js';
import { TLS_CERT_KEY, TLS_KEY_KEY, upstreamCredentialKeys, type PackageIndex, type PackageRegistry, type SecretKeyRef } from '../resources/types.js';

export const SECRET_OPT_IN_LABEL = 'velodex.dev/allow-reference';
export const SECRET_OPT_IN_VALUE = 'true';
/** The label selector of every Secret list and watch the operator makes. */
export const SECRET_OPT_IN_SELECTOR = `${SECRET_OPT_IN_LABEL}=${SECRET_OPT_IN_VALUE}`;

/** One Secret key a resource names, and the field that names it (for messages). */
export interface SecretUse {
  ref: SecretKeyRef;
  field: string;
  /** The Certificate the operator requests that fills this Secret (`spec.tls.certManager`): its absence is a wait, not a mistake. */
  filledByCertificate?: string;
}

export function indexSecretUses(ix: PackageIndex): SecretUse[] {
  const s = ix.spec;
  const uses: SecretUse[] = [];
  if (s.uploadTokenSecretRef) uses.push({ ref: s.uploadTokenSecretRef, field: 'spec.uploadTokenSecretRef' });
  for (const token of s.tokens ?? []) uses.push({ ref: token.secretRef, field: `spec.tokens[${token.name}].secretRef` });
  if (s.upstreamCredentialsSecretRef) {
    const { username, password } = upstreamCredentialKeys(s.upstreamCredentialsSecretRef);
    uses.push({ ref: username, field: 'spec.upstreamCredentialsSecretRef' }, { ref: password, field: 'spec.upstreamCredentialsSecretRef' });
  }
  for (const [i, upstream] of (s.upstreams ?? []).entries()) {
    if (!upstream.credentialsSecretRef) continue;
    const { username, password } = upstreamCredentialKeys(upstream.credentialsSecretRef);
    const field = `spec.upstreams[${i}].credentialsSecretRef`;
    uses.push({ ref: username, field }, { ref: password, field });
  }
  for (const [i, hook] of (s.webhooks ?? []).entries()) {
    if (hook.urlSecretRef) uses.push({ ref: hook.urlSecretRef, field: `spec.webhooks[${i}].urlSecretRef` });
    if (hook.secretRef) uses.push({ ref: hook.secretRef, field: `spec.webhooks[${i}].secretRef` });
  }
  return uses;
}

export function registrySecretUses(registry: PackageRegistry): SecretUse[] {
  const creds = registry.spec.storage.credentialsSecretRef;
  const field = `PackageRegistry "${registry.metadata.name}" spec.storage.credentialsSecretRef`;
  const admin = registry.spec.adminTokenSecretRef;
  return [
    { ref: { name: creds.name, key: creds.accessKeyKey ?? DEFAULT_ACCESS_KEY_KEY }, field },
    { ref: { name: creds.name, key: creds.secretKeyKey ?? DEFAULT_SECRET_KEY_KEY }, field },
    ...(admin ? [{ ref: admin, field: `PackageRegistry "${registry.metadata.name}" spec.adminTokenSecretRef` }] : []),
    ...tlsSecretUses(registry),
  ];
}

/** The certificate Secret of `spec.tls`: checked and watched like the others, mounted apart (render/objects.ts). */
function tlsSecretUses(registry: PackageRegistry): SecretUse[] {
  const tls = registry.spec.tls;
  if (!tls) return [];
  const field = `PackageRegistry "${registry.metadata.name}" spec.tls.secretName`;
  const filledBy = tls.certManager ? { filledByCertificate: registry.metadata.name } : {};
  return [TLS_CERT_KEY, TLS_KEY_KEY].map((key) => ({ ref: { name: tls.secretName, key }, field, ...filledBy }));
}

/** Every Secret name the resources of a namespace reference. */
export function referencedSecretNames(registries: readonly PackageRegistry[], indexes: readonly PackageIndex[]): Set<string> {
  const uses = [...registries.flatMap(registrySecretUses), ...indexes.flatMap(indexSecretUses)];
  return new Set(uses.map((u) => u.ref.name));
}
