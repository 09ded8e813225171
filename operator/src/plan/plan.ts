/**
 * Which PackageIndexes each PackageRegistry serves, and why the others are not served: the pure
 * decision at the heart of a reconcile, from the resources of one namespace and the Secrets they
 * name. Nothing here talks to the API server; `reconcile/` applies the result.
 *
 * An index is left out, with a reason a person can act on, when its registry does not exist
 * (`RegistryNotFound`), a Secret or key it names does not (`SecretNotFound`), a Secret it names
 * has not opted in to being used by velodex (`SecretNotOptedIn`, secret-refs.ts), an older index
 * of its registry already has its route (`RouteConflict`: the older one keeps serving), or its
 * spec or the registry's own config check refuses it (`InvalidSpec`, with the registry's message).
 * A registry whose certificate Secret cert-manager has yet to write waits (`CertificatePending`).
 * A registry whose image the platform does not allow (`ImageNotAllowed`, images.ts) or whose
 * storage Secret is missing serves nothing. What is left is rendered and checked again until the
 * registry accepts the whole config; the check names the index a problem is in as data
 * (`ConfigError.index`), never left to be found in its message.
 *
 * Each refusal is about the resource it is stored under: `refused` is keyed by the index, a
 * registry's own is its plan's `refusal` (and every index it would serve carries it too).
 */
import { ConfigError, checkConfigText } from '@velodex/registry/config-check';
import { renderRegistryConfig, type RenderedConfig } from '../render/registry-config.js';
import type { NodeMirrorRegistry, PackageIndex, PackageRegistry } from '../resources/types.js';
import { imageRefusal, type ImagePolicy } from './images.js';
import { indexSecretUses, registrySecretUses, SECRET_OPT_IN_SELECTOR, type SecretUse } from './secret-refs.js';

export type Reason = 'RegistryNotFound' | 'SecretNotFound' | 'SecretNotOptedIn' | 'RouteConflict' | 'InvalidSpec' | 'ImageNotAllowed' | 'CertificatePending';

/**
 * Refusals that end by themselves, without a person changing anything (kstatus `Reconciling`, not
 * `Stalled`): the certificate Secret cert-manager has not filled yet.
 */
export function isPending(refusal: Refusal): boolean {
  return refusal.reason === 'CertificatePending';
}

/** A Secret's keys and decoded values, by Secret name. */
export type SecretsByName = ReadonlyMap<string, Readonly<Record<string, string>>>;

/** What a plan reads besides the resources themselves. */
export interface PlanInput {
  /** The Secrets that opted in (labelled `velodex.dev/allow-reference=true`), with their data. */
  secrets: SecretsByName;
  /** Names of referenced Secrets that exist without the label: refused by name, never read. */
  notOptedIn: ReadonlySet<string>;
  images: ImagePolicy;
}

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
  /** `spec.nodeMirror`, when given and the registry runs: which entries are rendered, which are left out. */
  mirror?: MirrorPlan;
}

/**
 * The node mirror's entries as planned. The CRD cannot see other resources, so an entry whose
 * index is not served here (none of that name, not a cached oci index, refused) is left out with
 * why, and the registry serves the rest: one wrong entry does not take the mirror of every
 * other registry down with it.
 */
export interface MirrorPlan {
  served: NodeMirrorRegistry[];
  left: Array<{ entry: NodeMirrorRegistry; message: string }>;
}

export interface NamespacePlan {
  registries: Map<string, RegistryPlan>;
  /** Every index that is not served, by name, with why. */
  refused: Map<string, Refusal>;
}

export function registryOf(ix: PackageIndex): string {
  return ix.spec.registry ?? DEFAULT_REGISTRY;
}

/**
 * A route as the registry compares routes (its segments, empty ones dropped), so that every clash
 * is found here, where the older index keeps the route, and none is left to the registry's check.
 */
function routeKey(ix: PackageIndex): string {
  return ix.spec.route.split('/').filter((s) => s !== '').join('/');
}

/** Older first (creation time, then name): the order in which indexes claim routes. */
function byAge(a: PackageIndex, b: PackageIndex): number {
  const ta = a.metadata.creationTimestamp ?? '';
  const tb = b.metadata.creationTimestamp ?? '';
  if (ta !== tb) return ta < tb ? -1 : 1;
  return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
}

function secretRefusal(uses: readonly SecretUse[], namespace: string, input: PlanInput): Refusal | null {
  for (const { ref, field, filledByCertificate } of uses) {
    const secret = input.secrets.get(ref.name);
    if (secret?.[ref.key] !== undefined) continue;
    if (!secret && filledByCertificate !== undefined && !input.notOptedIn.has(ref.name)) {
      return {
        reason: 'CertificatePending',
        message: `${field}: Secret "${ref.name}" does not exist yet; cert-manager writes it once it has issued Certificate "${filledByCertificate}" (the registry's Certificate condition says how that goes)`,
      };
    }
    if (secret) return { reason: 'SecretNotFound', message: `${field}: Secret "${ref.name}" has no key "${ref.key}"` };
    if (input.notOptedIn.has(ref.name)) {
      return {
        reason: 'SecretNotOptedIn',
        message:
          `${field}: Secret "${ref.name}" is not labelled ${SECRET_OPT_IN_SELECTOR}, and velodex uses only Secrets that opt in ` +
          `(so that a resource cannot send just any Secret of the namespace to a server it names); if this Secret is meant for velodex: ` +
          `kubectl label secret ${ref.name} -n ${namespace} ${SECRET_OPT_IN_SELECTOR}`,
      };
    }
    return { reason: 'SecretNotFound', message: `${field}: Secret "${ref.name}" does not exist in this namespace` };
  }
  return null;
}

/** `https://user:pass@host/`: credentials in a resource anyone who may read it sees. */
function hasUserInfo(url: string): boolean {
  try {
    const u = new URL(url);
    return u.username !== '' || u.password !== '';
  } catch {
    return /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(url);
  }
}

/** What the CRD refuses at apply time, checked again (a CRD installed before the rule, say). */
function specRefusal(ix: PackageIndex): Refusal | null {
  const kind = `PackageIndex "${ix.metadata.name}" is a ${ix.spec.role} ${ix.spec.ecosystem} index`;
  if (ix.spec.retention && (ix.spec.ecosystem !== 'oci' || ix.spec.role !== 'hosted')) return { reason: 'InvalidSpec', message: `spec.retention applies to hosted oci indexes only; ${kind}` };
  if (ix.spec.quotaBytes !== undefined && ix.spec.role !== 'hosted') return { reason: 'InvalidSpec', message: `spec.quotaBytes is only for a hosted index; ${kind}` };
  for (const field of ['maxBytes', 'evictUnusedAfter'] as const) {
    if (ix.spec[field] !== undefined && ix.spec.role !== 'cached') return { reason: 'InvalidSpec', message: `spec.${field} is only for a cached index; ${kind}` };
  }
  const tokenNames = new Set<string>();
  for (const token of ix.spec.tokens ?? []) {
    if (tokenNames.has(token.name)) return { reason: 'InvalidSpec', message: `spec.tokens: the name "${token.name}" is given twice; a token's name is unique within its index` };
    tokenNames.add(token.name);
    const writes = token.scopes.filter((scope) => scope !== 'read');
    if (writes.length > 0 && ix.spec.role !== 'hosted') {
      return {
        reason: 'InvalidSpec',
        message: `spec.tokens[${token.name}]: the ${writes.join(' and ')} ${writes.length > 1 ? 'scopes are' : 'scope is'} only for a hosted index (a virtual index's writes land in its upload target, whose tokens apply); ${kind}`,
      };
    }
  }
  const grants = new Set<string>();
  for (const [i, grant] of (ix.spec.access?.serviceAccounts ?? []).entries()) {
    const where = `spec.access.serviceAccounts[${i}]`;
    const namespace = grant.namespace ?? ix.metadata.namespace;
    const key = `${namespace}/${grant.name}`;
    if (grants.has(key)) return { reason: 'InvalidSpec', message: `${where}: ServiceAccount "${grant.name}" of namespace "${namespace}" has another rule on this index; give it one rule with every scope it needs` };
    grants.add(key);
    const writes = grant.scopes.filter((scope) => scope !== 'read');
    if (writes.length > 0 && ix.spec.role !== 'hosted') {
      return { reason: 'InvalidSpec', message: `${where}: the ${writes.join(' and ')} ${writes.length > 1 ? 'scopes are' : 'scope is'} only for a hosted index (a virtual index's writes land in its upload target, whose rules apply); ${kind}` };
    }
  }
  const publishers = ix.spec.access?.trustedPublishers ?? [];
  if (publishers.length > 0 && ix.spec.role !== 'hosted') return { reason: 'InvalidSpec', message: `spec.access.trustedPublishers is only for a hosted index (the uploads land there); ${kind}` };
  const publisherNames = new Set<string>();
  for (const publisher of publishers) {
    if (publisherNames.has(publisher.name)) return { reason: 'InvalidSpec', message: `spec.access.trustedPublishers: the name "${publisher.name}" is given twice; a publisher's name is unique within its index` };
    publisherNames.add(publisher.name);
    if (publisher.repository === undefined && publisher.projectPath === undefined) {
      return { reason: 'InvalidSpec', message: `spec.access.trustedPublishers[${publisher.name}] names no repository or projectPath: the issuer signs for every repository it hosts` };
    }
  }
  for (const [i, hook] of (ix.spec.webhooks ?? []).entries()) {
    const where = `spec.webhooks[${i}]`;
    if ((hook.url === undefined) === (hook.urlSecretRef === undefined)) return { reason: 'InvalidSpec', message: `${where}: give exactly one of url and urlSecretRef` };
    if (hook.url !== undefined && hasUserInfo(hook.url)) {
      return {
        reason: 'InvalidSpec',
        message: `${where}.url carries user info (user:password@host), which anyone who may read the resource would see: put the whole URL in a Secret labelled ${SECRET_OPT_IN_SELECTOR} and name it in ${where}.urlSecretRef`,
      };
    }
  }
  return null;
}

export function planNamespace(registries: readonly PackageRegistry[], indexes: readonly PackageIndex[], input: PlanInput): NamespacePlan {
  const refused = new Map<string, Refusal>();
  const byRegistry = new Map(registries.map((r) => [r.metadata.name, r]));
  const candidates = new Map<string, PackageIndex[]>();
  for (const ix of [...indexes].sort(byAge)) {
    const name = registryOf(ix);
    if (!byRegistry.has(name)) {
      refused.set(ix.metadata.name, { reason: 'RegistryNotFound', message: `PackageRegistry "${name}" does not exist in this namespace; create it or set spec.registry` });
      continue;
    }
    const refusal = specRefusal(ix) ?? secretRefusal(indexSecretUses(ix), ix.metadata.namespace, input);
    if (refusal) {
      refused.set(ix.metadata.name, refusal);
      continue;
    }
    const list = candidates.get(name) ?? [];
    const holder = list.find((other) => routeKey(other) === routeKey(ix));
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
    const plan = planRegistry(registry, candidates.get(name) ?? [], input, refused);
    plans.set(name, plan);
    if (plan.refusal) for (const ix of candidates.get(name) ?? []) refused.set(ix.metadata.name, plan.refusal);
  }
  return { registries: plans, refused };
}

function planRegistry(registry: PackageRegistry, candidates: PackageIndex[], input: PlanInput, refused: Map<string, Refusal>): RegistryPlan {
  const refusal = imageRefusal(registry, input.images) ?? secretRefusal(registrySecretUses(registry), registry.metadata.namespace, input);
  if (refusal) return { registry, served: [], config: null, refusal };
  const { secrets } = input;
  let served = candidates;
  // Mirror entries the registry's check refused (an older CRD let them through): left out, with its message.
  const droppedMirrors = new Map<NodeMirrorRegistry, string>();
  for (;;) {
    served = withoutBrokenMembers(served, refused);
    const mirror = planMirror(registry.spec.nodeMirror?.registries ?? [], served, refused, droppedMirrors);
    const config = renderRegistryConfig(registry, served, mirror.served);
    try {
      checkConfigText(config.toml, `PackageRegistry "${registry.metadata.name}"`, (path) => readFromSecrets(path, config, secrets));
      return { registry, served: [...served].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1)), config, ...(registry.spec.nodeMirror ? { mirror } : {}) };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      const entry = mirrorEntryOf(err, mirror.served);
      if (entry) {
        droppedMirrors.set(entry, `the registry refuses it: ${err.message}`);
        continue;
      }
      // The check says which index a problem is in (ConfigError.index): that one is refused, the others go on.
      const culprit = err.index === undefined ? undefined : served.find((ix) => ix.metadata.name === err.index);
      if (!culprit) return { registry, served: [], config: null, refusal: { reason: 'InvalidSpec', message: `the registry refuses its config: ${err.message}` } };
      refused.set(culprit.metadata.name, { reason: 'InvalidSpec', message: `the registry refuses this index: ${err.message}` });
      served = served.filter((ix) => ix !== culprit);
    }
  }
}

/** Which entries of `spec.nodeMirror` name a served cached oci index; the others with why. */
function planMirror(wanted: readonly NodeMirrorRegistry[], served: readonly PackageIndex[], refused: ReadonlyMap<string, Refusal>, dropped: ReadonlyMap<NodeMirrorRegistry, string>): MirrorPlan {
  const plan: MirrorPlan = { served: [], left: [] };
  for (const entry of wanted) {
    const message = dropped.get(entry) ?? mirrorRefusal(entry, served, refused);
    if (message === null) plan.served.push(entry);
    else plan.left.push({ entry, message });
  }
  return plan;
}

function mirrorRefusal(entry: NodeMirrorRegistry, served: readonly PackageIndex[], refused: ReadonlyMap<string, Refusal>): string | null {
  const index = served.find((ix) => ix.metadata.name === entry.index);
  if (!index) {
    const why = refused.get(entry.index);
    return why ? `PackageIndex "${entry.index}" is not served (${why.reason}: ${why.message})` : `PackageIndex "${entry.index}" is not an index of this registry`;
  }
  if (index.spec.role !== 'cached' || index.spec.ecosystem !== 'oci') return `PackageIndex "${entry.index}" is a ${index.spec.role} ${index.spec.ecosystem} index; a registry is mirrored by a cached oci index`;
  return null;
}

/** The rendered mirror entry a config error is about (`mirror[<i>]...`), if it is about one. */
function mirrorEntryOf(err: ConfigError, rendered: readonly NodeMirrorRegistry[]): NodeMirrorRegistry | undefined {
  // `mirror[0].index` from the registry's rules, `mirror.0.registry` from its schema.
  const m = /^mirror(?:\[([0-9]+)\]|\.([0-9]+))/.exec(err.where);
  return m ? rendered[Number(m[1] ?? m[2])] : undefined;
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
