/**
 * A PackageRegistry and the PackageIndexes it serves, rendered as the registry's TOML config.
 * Deterministic: the same resources give the same bytes (indexes by name, keys in a fixed order),
 * so the checksum on the pod template changes only when the config does. Secrets never appear in
 * the text: every credential is a `_file` key naming where the pod mounts its Secret.
 */
import { stringify } from 'smol-toml';
import { scratchBudgetBytes, scratchLimit } from './scratch.js';
import { TLS_CERT_KEY, TLS_KEY_KEY, upstreamCredentialKeys, type ByteSize, type NodeMirrorRegistry, type PackageIndex, type PackageRegistry, type RegistryGc, type SecretKeyRef, type UpstreamSpec } from '../resources/types.js';

/** Where a pod mounts each referenced Secret: one folder per Secret, one file per key. */
export const SECRETS_DIR = '/var/run/velodex/secrets';
/** The container's port and data dir (scratch space only: the pods keep no state). */
export const REGISTRY_PORT = 8080;
export const DATA_DIR = '/var/lib/velodex';
/**
 * Where a pod mounts the certificate Secret of `spec.tls`: the whole Secret as a folder (never a
 * `subPath`), so the kubelet's update of a renewed certificate reaches the files the registry
 * re-reads.
 */
export const TLS_DIR = '/etc/velodex/tls';

export const DEFAULT_ACCESS_KEY_KEY = 'access-key';
export const DEFAULT_SECRET_KEY_KEY = 'secret-key';

export function secretPath(ref: SecretKeyRef): string {
  return `${SECRETS_DIR}/${ref.name}/${ref.key}`;
}

/**
 * A CRD duration as the registry's TOML takes it. The CRDs allow plain seconds as a string
 * ("3600"); the registry reads seconds only as a number (its duration strings carry units), so
 * those become a TOML integer. Anything else is passed on for the registry's check to judge.
 */
function tomlDuration(value: string): number | string {
  return digitsAsInteger(value);
}

function digitsAsInteger(value: string): number | string {
  return /^[0-9]+$/.test(value) && Number.isSafeInteger(Number(value)) ? Number(value) : value;
}

/**
 * A CRD size as the registry's TOML takes it: an integer stays one, and so do plain digits given
 * as a string ("1048576"); a size with a unit ("10Gi") is passed on for the registry to read.
 */
function tomlSize(value: ByteSize): number | string {
  return typeof value === 'number' ? value : digitsAsInteger(value);
}

export interface RenderedConfig {
  toml: string;
  /** Every Secret the config reads from, by name, sorted: the pod mounts each one. */
  secrets: string[];
  /** `secretPath` → the Secret key it names, to answer the registry's config check. */
  secretFiles: Map<string, SecretKeyRef>;
  /**
   * Some index takes Kubernetes ServiceAccount tokens: the config has a `[kubernetes]` table and
   * the pods mount their own ServiceAccount token, with which they read the cluster's issuer.
   */
  serviceAccounts: boolean;
  /** The largest `policy.maxFileSize` of the indexes, if any sets one: what sizes the scratch volume. */
  largestFile?: number;
}

/** The audience a ServiceAccount token must be issued for (the registry's default, written out). */
export const SERVICE_ACCOUNT_AUDIENCE = 'velodex';

/**
 * The TOML for `registry` serving `indexes` (which must already belong to it and be valid), the
 * node mirror of `mirrors` (entries of its `spec.nodeMirror` whose index is among `indexes`; the
 * plan picks them).
 */
/**
 * Where clients outside the cluster reach the registry, when its spec declares an Ingress or an
 * HTTPRoute (the CRD allows one of the two): https when the Ingress has a certificate or the
 * route says its Gateway terminates TLS.
 */
export function externalUrl(registry: PackageRegistry): string | undefined {
  const { ingress, gatewayRoute } = registry.spec;
  if (ingress) return `${ingress.tlsSecretName ? 'https' : 'http'}://${ingress.host}`;
  if (gatewayRoute) return `${gatewayRoute.scheme ?? 'https'}://${gatewayRoute.host}`;
  return undefined;
}

/** The host of `externalUrl`, when there is one. */
export function externalHost(registry: PackageRegistry): string | undefined {
  return registry.spec.ingress?.host ?? registry.spec.gatewayRoute?.host;
}

export function renderRegistryConfig(registry: PackageRegistry, indexes: readonly PackageIndex[], mirrors: readonly NodeMirrorRegistry[] = []): RenderedConfig {
  const refs: SecretKeyRef[] = [];
  const file = (ref: SecretKeyRef) => {
    refs.push(ref);
    return secretPath(ref);
  };
  const { storage, rateLimit, logLevel, adminTokenSecretRef, retention, gc } = registry.spec;
  const creds = storage.credentialsSecretRef;
  const doc: Record<string, unknown> = {
    host: '0.0.0.0',
    port: REGISTRY_PORT,
    data_dir: DATA_DIR,
    ...(logLevel ? { log_level: logLevel } : {}),
    storage: {
      backend: 's3',
      endpoint: storage.endpoint,
      bucket: storage.bucket,
      ...(storage.region ? { region: storage.region } : {}),
      ...(storage.prefix ? { prefix: storage.prefix } : {}),
      access_key_file: file({ name: creds.name, key: creds.accessKeyKey ?? DEFAULT_ACCESS_KEY_KEY }),
      secret_key_file: file({ name: creds.name, key: creds.secretKeyKey ?? DEFAULT_SECRET_KEY_KEY }),
      ...(storage.redirect
        ? {
            redirect: true,
            ...(storage.redirect.minSize !== undefined ? { redirect_min_size: storage.redirect.minSize } : {}),
            ...(storage.redirect.ttlSeconds !== undefined ? { redirect_ttl_secs: storage.redirect.ttlSeconds } : {}),
            ...(storage.redirect.endpoint !== undefined ? { redirect_endpoint: storage.redirect.endpoint } : {}),
          }
        : {}),
      ...(storage.readCacheMs ? { read_cache_ms: storage.readCacheMs } : {}),
      // The listener's address is the pod's IP, from the env (VELODEX_PEER_HOST, objects.ts), not peer_host.
      ...(storage.peerCache ? { peer_cache: true } : {}),
      ...(storage.responseTimeoutSeconds !== undefined ? { response_timeout_secs: storage.responseTimeoutSeconds } : {}),
      ...(storage.idleTimeoutSeconds !== undefined ? { idle_timeout_secs: storage.idleTimeoutSeconds } : {}),
    },
  };
  if (adminTokenSecretRef) doc.admin = { token_file: file(adminTokenSecretRef) };
  if (rateLimit) {
    const classes = Object.fromEntries(
      (['read', 'download', 'write', 'admin'] as const).flatMap((c) => {
        const rc = rateLimit[c];
        return rc ? [[c, { requests: rc.requests, window_secs: rc.windowSeconds }]] : [];
      }),
    );
    doc.rate_limit = {
      ...(rateLimit.enabled !== undefined ? { enabled: rateLimit.enabled } : {}),
      ...(rateLimit.trustedProxies ? { trusted_proxies: rateLimit.trustedProxies } : {}),
      ...classes,
    };
  }
  if (retention?.every !== undefined) doc.retention = { every: tomlDuration(retention.every) };
  if (gc) doc.gc = gcTable(gc);
  // Not among the Secrets the pod template's checksum covers: a renewal rolls nothing.
  if (registry.spec.tls) doc.tls = { cert_file: `${TLS_DIR}/${TLS_CERT_KEY}`, key_file: `${TLS_DIR}/${TLS_KEY_KEY}` };
  const external = externalUrl(registry);
  if (external) doc.external_urls = [external];
  const serviceAccounts = indexes.some((ix) => (ix.spec.access?.serviceAccounts?.length ?? 0) > 0);
  // The API server, its CA and the pod's token are the pod's own (the registry's in-pod defaults).
  if (serviceAccounts) doc.kubernetes = { audience: SERVICE_ACCOUNT_AUDIENCE };
  doc.index = [...indexes].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0)).map((ix) => indexTable(ix, file));
  // In the spec's order: the order `/+api` lists them in.
  if (mirrors.length > 0) doc.mirror = mirrors.map((m) => ({ registry: m.registry, index: m.index }));
  const secretFiles = new Map(refs.map((r) => [secretPath(r), r]));
  const sizes = indexes.flatMap((ix) => (ix.spec.policy?.maxFileSize !== undefined ? [ix.spec.policy.maxFileSize] : []));
  const largestFile = sizes.length > 0 ? Math.max(...sizes) : undefined;
  // The registry refuses what would not fit its volume (less a margin), before the kubelet evicts the pod.
  const budget = scratchBudgetBytes(scratchLimit(registry, largestFile));
  if (budget !== null) (doc.storage as Record<string, unknown>).scratch_limit = budget;
  return { toml: stringify(doc), secrets: [...new Set(refs.map((r) => r.name))].sort(), secretFiles, serviceAccounts, ...(largestFile !== undefined ? { largestFile } : {}) };
}

/** `[gc]` with only the fields the spec sets: the registry's defaults stay its own (design §6). */
function gcTable(gc: RegistryGc): Record<string, unknown> {
  return {
    ...(gc.enabled !== undefined ? { enabled: gc.enabled } : {}),
    ...(gc.every !== undefined ? { every: tomlDuration(gc.every) } : {}),
    ...(gc.grace !== undefined ? { grace: tomlDuration(gc.grace) } : {}),
    ...(gc.lease !== undefined ? { lease: tomlDuration(gc.lease) } : {}),
    ...(gc.evictEvery !== undefined ? { evict_every: tomlDuration(gc.evictEvery) } : {}),
    ...(gc.cpuShare !== undefined ? { cpu_share: gc.cpuShare } : {}),
  };
}

/** One entry of `upstreams = [...]`: its credentials as mounted files, like every secret the operator renders. */
function upstreamTable(u: UpstreamSpec, file: (ref: SecretKeyRef) => string): Record<string, unknown> {
  const credentials = u.credentialsSecretRef ? upstreamCredentialKeys(u.credentialsSecretRef) : undefined;
  return {
    url: u.url,
    ...(u.hosts !== undefined && u.hosts.length > 0 ? { hosts: u.hosts } : {}),
    ...(credentials ? { username_file: file(credentials.username), password_file: file(credentials.password) } : {}),
    ...(u.failoverOn404 !== undefined ? { failover_on_404: u.failoverOn404 } : {}),
    ...(u.timeout !== undefined ? { timeout: tomlDuration(u.timeout) } : {}),
  };
}

function indexTable(ix: PackageIndex, file: (ref: SecretKeyRef) => string): Record<string, unknown> {
  const s = ix.spec;
  const table: Record<string, unknown> = { name: ix.metadata.name, route: s.route, ecosystem: s.ecosystem };
  switch (s.role) {
    case 'hosted':
      table.hosted = true;
      if (s.quotaBytes !== undefined) table.quota_bytes = tomlSize(s.quotaBytes);
      break;
    case 'cached':
      if (s.upstreams !== undefined) table.upstreams = s.upstreams.map((u) => upstreamTable(u, file));
      else table.cached = s.upstream;
      if (s.upstreamConcurrency !== undefined) table.upstream_concurrency = s.upstreamConcurrency;
      if (s.upstreamHosts !== undefined && s.upstreamHosts.length > 0) table.upstream_hosts = s.upstreamHosts;
      if (s.cacheTtlSeconds !== undefined) table.cache_ttl_secs = s.cacheTtlSeconds;
      if (s.upstreamDeletions !== undefined) table.upstream_deletions = s.upstreamDeletions;
      if (s.maxBytes !== undefined) table.max_bytes = tomlSize(s.maxBytes);
      if (s.evictUnusedAfter !== undefined) table.evict_unused_after = tomlDuration(s.evictUnusedAfter);
      if (s.upstreamCredentialsSecretRef) {
        const { username, password } = upstreamCredentialKeys(s.upstreamCredentialsSecretRef);
        table.upstream_username_file = file(username);
        table.upstream_password_file = file(password);
      }
      break;
    case 'virtual':
      table.members = s.members ?? [];
      if (s.uploadTarget !== undefined) table.upload_target = s.uploadTarget;
      break;
  }
  if (s.uploadTokenSecretRef) table.upload_token_file = file(s.uploadTokenSecretRef);
  if (s.tokens?.length) {
    table.token = s.tokens.map((t) => ({
      name: t.name,
      secret_file: file(t.secretRef),
      scopes: t.scopes,
      ...(t.projects ? { projects: t.projects } : {}),
      // A TOML string, not a TOML date-time: the registry reads both spellings the CRD allows.
      ...(t.expires !== undefined ? { expires: t.expires } : {}),
    }));
  }
  if (s.access?.serviceAccounts?.length) {
    table.service_account = s.access.serviceAccounts.map((a) => ({
      namespace: a.namespace ?? ix.metadata.namespace,
      name: a.name,
      scopes: a.scopes,
      ...(a.projects ? { projects: a.projects } : {}),
    }));
  }
  if (s.access?.trustedPublishers?.length) {
    table.trusted_publisher = s.access.trustedPublishers.map((p) => ({
      name: p.name,
      issuer: p.issuer,
      ...(p.repository !== undefined ? { repository: p.repository } : {}),
      ...(p.workflow !== undefined ? { workflow: p.workflow } : {}),
      ...(p.environment !== undefined ? { environment: p.environment } : {}),
      ...(p.projectPath !== undefined ? { project_path: p.projectPath } : {}),
      ...(p.ref !== undefined ? { ref: p.ref } : {}),
      ...(p.claims ? { claims: p.claims } : {}),
      ...(p.projects ? { projects: p.projects } : {}),
    }));
  }
  if (s.volatile !== undefined) table.volatile = s.volatile;
  if (s.read !== undefined) table.read = s.read;
  if (s.policy) {
    const p = s.policy;
    table.policy = {
      ...(p.maxFileSize !== undefined ? { 'max-file-size': p.maxFileSize } : {}),
      ...(p.denyProjects ? { 'deny-projects': p.denyProjects } : {}),
      ...(p.allowProjects ? { 'allow-projects': p.allowProjects } : {}),
      ...(p.minReleaseAge !== undefined ? { 'min-release-age': tomlDuration(p.minReleaseAge) } : {}),
    };
  }
  if (s.retention) {
    if (s.retention.untaggedAfter !== undefined) table.untagged_after = tomlDuration(s.retention.untaggedAfter);
    if (s.retention.keepTags?.length) table.keep_tags = s.retention.keepTags.map((r) => ({ match: r.match, newest: r.newest }));
  }
  if (s.webhooks?.length) {
    table.webhook = s.webhooks.map((w) => ({
      // A URL whose path is the receiver's key comes from its Secret, as every credential does.
      ...(w.urlSecretRef ? { url_file: file(w.urlSecretRef) } : { url: w.url }),
      ...(w.secretRef ? { secret_file: file(w.secretRef) } : {}),
      ...(w.events ? { events: w.events } : {}),
    }));
  }
  return table;
}
