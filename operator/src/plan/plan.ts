/**
 * Which PackageIndexes each PackageRegistry serves, and why the others are not served: the pure
 * decision at the heart of a reconcile, from the resources of one namespace and the Secrets they
 * name. Nothing here talks to the API server; `reconcile/` applies the result.
 *
 * An index is left out, with a reason a person can act on, when its registry does not exist
 * (`RegistryNotFound`), a Secret or key it names does not (`SecretNotFound`), an older index of
 * its registry already has its route (`RouteConflict`: the older one keeps serving), or the
 * registry's own config check refuses it (`InvalidSpec`, with the registry's message). What is
 * left is rendered and checked again until the registry accepts the whole config.
 */
import { ConfigError, checkConfigText } from '@velodex/registry/config-check';
import { renderRegistryConfig, type RenderedConfig } from '../render/registry-config.js';
import { upstreamCredentialKeys, type PackageIndex, type PackageRegistry, type SecretKeyRef } from '../resources/types.js';

export type Reason = 'RegistryNotFound' | 'SecretNotFound' | 'RouteConflict' | 'InvalidSpec';

/** A Secret's keys and decoded values, by Secret name. */
export type SecretsByName = ReadonlyMap<string, Readonly<Record<string, string>>>;

export const DEFAULT_REGISTRY = 'default';

export interface Refusal {
  reason: Reason;
  message: string;
}

export interface RegistryPlan {
  registry: PackageRegistry;
  /** Served indexes, by name. */
  served: PackageIndex[];
  /** The config of the served indexes; null when the registry itself cannot run (see `refusal`). */
  config: RenderedConfig | null;
  /** Why the registry cannot run at all (its storage Secret missing, its config refused). */
  refusal?: Refusal;
}

export interface NamespacePlan {
  registries: Map<string, RegistryPlan>;
  /** Every index that is not served, by name, with why. */
  refused: Map<string, Refusal>;
}

export function registryOf(ix: PackageIndex): string {
  return ix.spec.registry ?? DEFAULT_REGISTRY;
}

/** Older first (creation time, then name): the order in which indexes claim routes. */
function byAge(a: PackageIndex, b: PackageIndex): number {
  const ta = a.metadata.creationTimestamp ?? '';
  const tb = b.metadata.creationTimestamp ?? '';
  if (ta !== tb) return ta < tb ? -1 : 1;
  return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
}

function missingSecret(ref: SecretKeyRef, secrets: SecretsByName, what: string): Refusal | null {
  const secret = secrets.get(ref.name);
  if (!secret) return { reason: 'SecretNotFound', message: `${what}: Secret "${ref.name}" does not exist in this namespace` };
  if (secret[ref.key] === undefined) return { reason: 'SecretNotFound', message: `${what}: Secret "${ref.name}" has no key "${ref.key}"` };
  return null;
}

function indexSecretRefusal(ix: PackageIndex, secrets: SecretsByName): Refusal | null {
  if (ix.spec.uploadTokenSecretRef) {
    const r = missingSecret(ix.spec.uploadTokenSecretRef, secrets, 'spec.uploadTokenSecretRef');
    if (r) return r;
  }
  if (ix.spec.upstreamCredentialsSecretRef) {
    const { username, password } = upstreamCredentialKeys(ix.spec.upstreamCredentialsSecretRef);
    const r = missingSecret(username, secrets, 'spec.upstreamCredentialsSecretRef') ?? missingSecret(password, secrets, 'spec.upstreamCredentialsSecretRef');
    if (r) return r;
  }
  for (const [i, hook] of (ix.spec.webhooks ?? []).entries()) {
    if (!hook.secretRef) continue;
    const r = missingSecret(hook.secretRef, secrets, `spec.webhooks[${i}].secretRef`);
    if (r) return r;
  }
  return null;
}

export function planNamespace(registries: readonly PackageRegistry[], indexes: readonly PackageIndex[], secrets: SecretsByName): NamespacePlan {
  const refused = new Map<string, Refusal>();
  const byRegistry = new Map(registries.map((r) => [r.metadata.name, r]));
  const candidates = new Map<string, PackageIndex[]>();
  for (const ix of [...indexes].sort(byAge)) {
    const name = registryOf(ix);
    if (!byRegistry.has(name)) {
      refused.set(ix.metadata.name, { reason: 'RegistryNotFound', message: `PackageRegistry "${name}" does not exist in this namespace; create it or set spec.registry` });
      continue;
    }
    const secretRefusal = indexSecretRefusal(ix, secrets);
    if (secretRefusal) {
      refused.set(ix.metadata.name, secretRefusal);
      continue;
    }
    const list = candidates.get(name) ?? [];
    const holder = list.find((other) => other.spec.route.replace(/\/+$/, '') === ix.spec.route.replace(/\/+$/, ''));
    if (holder) {
      refused.set(ix.metadata.name, { reason: 'RouteConflict', message: `route "${ix.spec.route}" is already served by the older PackageIndex "${holder.metadata.name}"` });
      continue;
    }
    list.push(ix);
    candidates.set(name, list);
  }

  const plans = new Map<string, RegistryPlan>();
  for (const registry of [...registries].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))) {
    const name = registry.metadata.name;
    const plan = planRegistry(registry, candidates.get(name) ?? [], secrets, refused);
    plans.set(name, plan);
    if (plan.refusal) for (const ix of candidates.get(name) ?? []) refused.set(ix.metadata.name, plan.refusal);
  }
  return { registries: plans, refused };
}

function planRegistry(registry: PackageRegistry, candidates: PackageIndex[], secrets: SecretsByName, refused: Map<string, Refusal>): RegistryPlan {
  const creds = registry.spec.storage.credentialsSecretRef;
  for (const key of [creds.accessKeyKey ?? 'access-key', creds.secretKeyKey ?? 'secret-key']) {
    const r = missingSecret({ name: creds.name, key }, secrets, `PackageRegistry "${registry.metadata.name}" spec.storage.credentialsSecretRef`);
    if (r) return { registry, served: [], config: null, refusal: r };
  }
  let served = candidates;
  for (;;) {
    served = withoutBrokenMembers(served, refused);
    const config = renderRegistryConfig(registry, served);
    try {
      checkConfigText(config.toml, `PackageRegistry "${registry.metadata.name}"`, (path) => readFromSecrets(path, config, secrets));
      return { registry, served: [...served].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1)), config };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      const culprit = served.find((ix) => err.message.includes(`index "${ix.metadata.name}"`));
      if (!culprit) return { registry, served: [], config: null, refusal: { reason: 'InvalidSpec', message: `the registry refuses its config: ${err.message}` } };
      refused.set(culprit.metadata.name, { reason: 'InvalidSpec', message: `the registry refuses this index: ${err.message}` });
      served = served.filter((ix) => ix !== culprit);
    }
  }
}

/** A virtual index whose members are not all served is not served either (to a fixed point). */
function withoutBrokenMembers(indexes: PackageIndex[], refused: Map<string, Refusal>): PackageIndex[] {
  let current = indexes;
  for (;;) {
    const names = new Set(current.map((ix) => ix.metadata.name));
    const broken = current.find((ix) => ix.spec.role === 'virtual' && (ix.spec.members ?? []).some((m) => !names.has(m)));
    if (!broken) return current;
    const member = (broken.spec.members ?? []).find((m) => !names.has(m)) ?? '';
    const why = refused.get(member);
    refused.set(broken.metadata.name, {
      reason: 'InvalidSpec',
      message: why ? `member "${member}" is not served (${why.reason}: ${why.message})` : `member "${member}" is not a PackageIndex of this registry`,
    });
    current = current.filter((ix) => ix !== broken);
  }
}

function readFromSecrets(path: string, config: RenderedConfig, secrets: SecretsByName): string {
  const ref = config.secretFiles.get(path);
  const value = ref ? secrets.get(ref.name)?.[ref.key] : undefined;
  if (value === undefined) throw Object.assign(new Error(`no Secret key for ${path}`), { code: 'ENOENT' });
  return value;
}
