/**
 * Named builders for the config files the suites start servers with, so a test reads as the
 * scenario it sets up (`hosted('hosted', { token })`, `cached('pypi', url)`, `virtual('dev',
 * ['hosted', 'pypi'])`) rather than as TOML. Each builder returns a `ConfigPart`, a piece of the
 * file in its own shape (typed by the loader's schema, so a misspelt key fails to compile);
 * `toml(...parts)` joins the pieces and writes them with smol-toml, which quotes every string.
 *
 * Inline TOML stays where the text itself is under test: config loading and its errors,
 * check-config output, the docs' examples, the property tests of the loader.
 */
import { stringify } from 'smol-toml';
// Types only: the bench harness uses these builders without loading the server's modules.
import type { FileConfig, IndexFileConfig, ServiceAccountFileConfig, TokenFileConfig, TrustedPublisherFileConfig, WebhookFileConfig } from '../../registry/src/config/schema.js';

/** A piece of a config file: some indexes, a top-level table, a top-level key. */
export type ConfigPart = FileConfig;

/** A secret as a file gives it: inline, from an environment variable, or from a file. */
export type SecretValue = string | { env: string } | { file: string };

/** The keys of one secret `K` in a file: `K`, `K_env` or `K_file`. */
type SecretFields<K extends string> = Partial<Record<K | `${K}_env` | `${K}_file`, string>>;

/** The fields of one secret `key`, in the one spelling `value` picks (none when it is unset). */
function secret<K extends string>(key: K, value: SecretValue | undefined): SecretFields<K> {
  // A computed key widens to `string` in TypeScript; each branch sets one of the three keys.
  if (value === undefined) return {};
  if (typeof value === 'string') return { [key]: value } as SecretFields<K>;
  if ('env' in value) return { [`${key}_env`]: value.env } as SecretFields<K>;
  return { [`${key}_file`]: value.file } as SecretFields<K>;
}

export interface PolicyOptions {
  maxFileSize?: number;
  denyProjects?: string[];
  allowProjects?: string[];
  /** Seconds, or a duration such as "7d". */
  minReleaseAge?: number | string;
}

export type WebhookEvent = NonNullable<WebhookFileConfig['events']>[number];

export interface WebhookOptions {
  url: SecretValue;
  secret?: SecretValue;
  /** Every event unless given. */
  events?: WebhookEvent[];
}

/** A named token (`[[index.token]]`). */
export interface TokenOptions {
  name: string;
  secret: SecretValue;
  scopes: Array<'read' | 'upload' | 'delete'>;
  projects?: string[];
  /** A date or offset date-time, as a string. */
  expires?: string;
}

/** What every role may set. */
export interface IndexOptions {
  /** `root/<name>` unless given. */
  route?: string;
  /** The default ecosystem (Python) unless given; `oci.hosted(...)` and its siblings set it. */
  ecosystem?: string;
  policy?: PolicyOptions;
  webhooks?: WebhookOptions[];
  tokens?: TokenOptions[];
  /** `read = "token"`: a private index. */
  read?: 'open' | 'token';
  /** `[[index.service_account]]`: Kubernetes ServiceAccounts and what they may do. */
  serviceAccounts?: ServiceAccountFileConfig[];
}

export interface HostedOptions extends IndexOptions {
  /** The upload token; without one the index takes no uploads. */
  token?: SecretValue;
  volatile?: boolean;
  /** Retention (a hosted OCI index): `untagged_after`, seconds or a duration such as "14d". */
  untaggedAfter?: number | string;
  /** Retention (a hosted OCI index): `keep_tags`. */
  keepTags?: Array<{ match: string; newest: number }>;
  /** `quota_bytes`: bytes or a size such as "10MiB". */
  quota?: number | string;
  /** `[[index.trusted_publisher]]`, written as given (snake_case keys). */
  trustedPublishers?: TrustedPublisherFileConfig[];
}

export interface CachedOptions extends IndexOptions {
  ttlSecs?: number;
  upstreamConcurrency?: number;
  /** Hosts that belong to the upstream besides its own (`upstream_hosts`). */
  upstreamHosts?: string[];
  credentials?: { username?: SecretValue; password?: SecretValue };
  /** The cache's budget: `max_bytes` (bytes or a size) and `evict_unused_after` (seconds or a duration). */
  maxBytes?: number | string;
  evictUnusedAfter?: number | string;
  /** `upstream_deletions`: what a page or tag the upstream deleted becomes. */
  upstreamDeletions?: 'follow' | 'keep';
}

export interface VirtualOptions extends IndexOptions {
  uploadTarget?: string;
}

// smol-toml leaves out keys whose value is undefined, so an option not given writes nothing.
function index(name: string, role: Partial<IndexFileConfig>, o: IndexOptions): ConfigPart {
  const policy: IndexFileConfig['policy'] = o.policy && {
    'max-file-size': o.policy.maxFileSize,
    'deny-projects': o.policy.denyProjects,
    'allow-projects': o.policy.allowProjects,
    'min-release-age': o.policy.minReleaseAge,
  };
  const webhook = o.webhooks?.map((w): WebhookFileConfig => ({ ...secret('url', w.url), ...secret('secret', w.secret), events: w.events }));
  const token = o.tokens?.map((t): TokenFileConfig => ({ name: t.name, ...secret('secret', t.secret), scopes: t.scopes, projects: t.projects, expires: t.expires }));
  return { index: [{ name, route: o.route ?? `root/${name}`, ecosystem: o.ecosystem, ...role, policy, webhook, token, service_account: o.serviceAccounts, read: o.read }] };
}

/** A hosted index. */
export function hosted(name: string, o: HostedOptions = {}): ConfigPart {
  return index(name, { hosted: true, volatile: o.volatile, ...secret('upload_token', o.token), untagged_after: o.untaggedAfter, keep_tags: o.keepTags, quota_bytes: o.quota, trusted_publisher: o.trustedPublishers }, o);
}

/** A cached index of the upstream at `upstream` (a Python index's Simple URL, a registry's base URL). */
export function cached(name: string, upstream: string, o: CachedOptions = {}): ConfigPart {
  return index(
    name,
    {
      cached: upstream,
      upstream_hosts: o.upstreamHosts,
      ...cacheKeys(o),
      ...secret('upstream_username', o.credentials?.username),
      ...secret('upstream_password', o.credentials?.password),
    },
    o,
  );
}

/** The keys of a cached index besides its upstreams: what `cached` and `cachedFrom` share. */
function cacheKeys(o: Omit<CachedOptions, 'upstreamHosts' | 'credentials'>): Record<string, unknown> {
  return {
    cache_ttl_secs: o.ttlSecs,
    upstream_concurrency: o.upstreamConcurrency,
    max_bytes: o.maxBytes,
    evict_unused_after: o.evictUnusedAfter,
    upstream_deletions: o.upstreamDeletions,
  };
}

/** One upstream of `cachedFrom` (an entry of `upstreams = [...]`). */
export interface UpstreamOptions {
  url: string;
  credentials?: { username?: SecretValue; password?: SecretValue };
  hosts?: string[];
  failoverOn404?: boolean;
  /** Seconds, or a duration such as "2s": connect plus response headers. */
  timeout?: number | string;
}

/** A cached index of several upstreams, asked in order (`upstreams = [...]`). */
export function cachedFrom(name: string, upstreams: UpstreamOptions[], o: Omit<CachedOptions, 'upstreamHosts' | 'credentials'> = {}): ConfigPart {
  return index(
    name,
    {
      upstreams: upstreams.map((u) => ({
        url: u.url,
        hosts: u.hosts,
        failover_on_404: u.failoverOn404,
        timeout: u.timeout,
        ...secret('username', u.credentials?.username),
        ...secret('password', u.credentials?.password),
      })),
      ...cacheKeys(o),
    },
    o,
  );
}

/** A virtual index over `members`, in order. */
export function virtual(name: string, members: string[], o: VirtualOptions = {}): ConfigPart {
  return index(name, { members, upload_target: o.uploadTarget }, o);
}

/** The same builders for OCI indexes. */
export const oci = {
  hosted: (name: string, o: HostedOptions = {}) => hosted(name, { ...o, ecosystem: 'oci' }),
  cached: (name: string, upstream: string, o: CachedOptions = {}) => cached(name, upstream, { ...o, ecosystem: 'oci' }),
  virtual: (name: string, members: string[], o: VirtualOptions = {}) => virtual(name, members, { ...o, ecosystem: 'oci' }),
  cachedFrom: (name: string, upstreams: UpstreamOptions[], o: Omit<CachedOptions, 'upstreamHosts' | 'credentials'> = {}) => cachedFrom(name, upstreams, { ...o, ecosystem: 'oci' }),
};

export interface RateWindow {
  requests: number;
  windowSecs: number;
}

export interface RateLimitOptions {
  enabled: boolean;
  read?: RateWindow;
  download?: RateWindow;
  write?: RateWindow;
  admin?: RateWindow;
}

/** `[rate_limit]`, with a window per request class given. */
export function rateLimit(o: RateLimitOptions): ConfigPart {
  const window = (w: RateWindow | undefined) => w && { requests: w.requests, window_secs: w.windowSecs };
  return { rate_limit: { enabled: o.enabled, read: window(o.read), download: window(o.download), write: window(o.write), admin: window(o.admin) } };
}

export interface GcOptions {
  enabled?: boolean;
  /** Seconds, or a duration such as "6h". */
  every?: number | string;
  grace?: number | string;
  lease?: number | string;
  /** How often cached indexes with a budget are brought within it (`evict_every`). */
  evictEvery?: number | string;
  /** The share of one core a collection may use (`cpu_share`). */
  cpuShare?: number;
}

/** `[gc]`: the garbage collection of blobs (docs/storage-lifecycle.md). */
export function gc(o: GcOptions): ConfigPart {
  return { gc: { enabled: o.enabled, every: o.every, grace: o.grace, lease: o.lease, evict_every: o.evictEvery, cpu_share: o.cpuShare } };
}

/** The top-level `trusted_proxies`: addresses and networks whose `X-Forwarded-*` headers are believed. */
/** `[search]`: the search index; `refreshSecs` is how often each process reads the summaries. */
export function search(o: { enabled?: boolean; refreshSecs?: number }): ConfigPart {
  return { search: { enabled: o.enabled, refresh_secs: o.refreshSecs } };
}

export function trustedProxies(addresses: string[]): ConfigPart {
  return { trusted_proxies: addresses };
}

/** `external_urls`: where clients outside reach the registry (TLS ended in front of it). */
export function externalUrls(urls: string[]): ConfigPart {
  return { external_urls: urls };
}

export interface ConnectionsOptions {
  headersTimeoutSecs?: number;
  bodyIdleTimeoutSecs?: number;
  keepAliveTimeoutSecs?: number;
  maxPerClient?: number;
  drainSecs?: number;
}

/** `[connections]`: the bounds on slow clients and the per-address cap. */
export function connections(o: ConnectionsOptions): ConfigPart {
  return {
    connections: {
      headers_timeout_secs: o.headersTimeoutSecs,
      body_idle_timeout_secs: o.bodyIdleTimeoutSecs,
      keep_alive_timeout_secs: o.keepAliveTimeoutSecs,
      max_per_client: o.maxPerClient,
      drain_secs: o.drainSecs,
    },
  };
}

/** `[admin]`: the token that opens the admin surfaces. */
export function admin(token: SecretValue): ConfigPart {
  return { admin: secret('token', token) };
}

/** `[retention]`: retention runs by themselves every `every` (seconds or a duration). */
export function retentionSchedule(every: number | string): ConfigPart {
  return { retention: { every } };
}

/** `[auth]`: the key velodex signs its own bearer tokens with. */
export function auth(o: { tokenSigningKey: SecretValue }): ConfigPart {
  return { auth: secret('token_signing_key', o.tokenSigningKey) };
}

/** `[kubernetes]`: where ServiceAccount tokens are verified (outside a pod every key but the audience is needed). */
export function kubernetes(o: { apiServer: string; caFile: string; tokenFile: string; audience?: string }): ConfigPart {
  return { kubernetes: { audience: o.audience, api_server: o.apiServer, ca_file: o.caFile, token_file: o.tokenFile } };
}

/** `[trusted_publishing]`: the audience and the lifetime of minted upload tokens. */
export function trustedPublishing(o: { audience?: string; tokenLifetime?: number | string }): ConfigPart {
  return { trusted_publishing: { audience: o.audience, token_lifetime: o.tokenLifetime } };
}

/** `[tls]`: serve HTTPS with this PEM certificate chain and key (`IssuedCertificate` of support/certificates.ts fits). */
export function tls(o: { certFile: string; keyFile: string }): ConfigPart {
  return { tls: { cert_file: o.certFile, key_file: o.keyFile } };
}

/** `[[mirror]]`: the cached index that serves each upstream registry a request names (containerd's `ns`). */
export function mirrors(entries: Array<{ registry: string; index: string }>): ConfigPart {
  return { mirror: entries };
}

/** `[metrics]`. */
export function metrics(o: { enabled: boolean }): ConfigPart {
  return { metrics: { enabled: o.enabled } };
}

/** A MinIO (or another S3 API) and the keys to it. */
export interface S3Server {
  endpoint: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
}

export interface S3StorageOptions {
  prefix: string;
  /** Another address of the same store (a proxy in front of it); the server's own unless given. */
  endpoint?: string;
  /** Full GETs of large blobs answered with a redirect to a presigned URL. */
  redirect?: { minSize?: number; ttlSecs?: number; endpoint?: string };
  /** `read_cache_ms`: request reads may be answered from memory this long. */
  readCacheMs?: number;
  /** `peer_cache`: request reads kept in memory, each write dropping every process's copies first. */
  peerCache?: boolean;
  /** `response_timeout_secs`: how long a request waits for the store's answer to begin. */
  responseTimeoutSecs?: number;
  idleTimeoutSecs?: number;
}

/** `[storage]` on S3 under `prefix`: a suite that pins the backend, or processes that share a store. */
export function s3Storage(s3: S3Server, o: S3StorageOptions): ConfigPart {
  const r = o.redirect;
  return {
    storage: {
      backend: 's3',
      endpoint: o.endpoint ?? s3.endpoint,
      bucket: s3.bucket,
      prefix: o.prefix,
      access_key: s3.accessKey,
      secret_key: s3.secretKey,
      redirect: r && true,
      redirect_min_size: r?.minSize,
      redirect_ttl_secs: r?.ttlSecs,
      redirect_endpoint: r?.endpoint,
      read_cache_ms: o.readCacheMs,
      peer_cache: o.peerCache,
      response_timeout_secs: o.responseTimeoutSecs,
      idle_timeout_secs: o.idleTimeoutSecs,
    },
  };
}

/**
 * The config file of `parts`: their indexes in order, their tables and keys. Two parts that set
 * the same table or key are a mistake in the test, not a merge.
 */
export function toml(...parts: ConfigPart[]): string {
  const indexes: IndexFileConfig[] = [];
  const rest: Record<string, unknown> = {};
  for (const part of parts) {
    for (const [key, value] of Object.entries(part)) {
      if (value === undefined) continue;
      if (key === 'index') {
        indexes.push(...(value as IndexFileConfig[]));
        continue;
      }
      if (key in rest) throw new Error(`toml(): "${key}" is set by two parts`);
      rest[key] = value;
    }
  }
  return stringify(indexes.length > 0 ? { ...rest, index: indexes } : rest);
}
