/** The resolved, validated configuration that the rest of the server reads. */
import type { ConnectionsConfig } from './connections.js';
import type { GcConfig } from './gc.js';
import type { RegistryMirror } from './mirrors.js';
import type { SearchConfig } from './search.js';
import type { Secret } from './secret.js';
import type { TlsConfig } from './tls.js';

import type { WorkersConfig } from './workers.js';

export type Role = 'hosted' | 'cached' | 'virtual';
/** An ecosystem's id (`python`, `oci`, ...): the ecosystems registered in the composition root. */
export type EcosystemId = string;

export interface PolicyConfig {
  maxFileSize?: number;
  denyProjects: string[];
  allowProjects: string[];
  /** Files younger than this are not served (seconds). */
  minReleaseAgeSecs?: number;
}

export interface WebhookConfig {
  /** Without user info: that moved to `basicAuth`. */
  url: string;
  /**
   * Set when the URL was given as `url_env` or `url_file` (`env:NAME`, `file:/path`): the URL is
   * then secret material (its path is the receiver's key) and is scrubbed from every log line.
   */
  urlSource?: string;
  secret?: Secret;
  /** `user:password` from the configured URL's user info, sent as `Authorization: Basic`. */
  basicAuth?: Secret;
  events?: string[];
}

/** What a named token may do: read a private index, upload, delete (yank, delete, restore, promote, OCI deletes). */
export type TokenScope = 'read' | 'upload' | 'delete';

/** One `[[index.token]]`: a named secret with scopes, optional name globs and an optional expiry. */
export interface IndexToken {
  name: string;
  secret: Secret;
  scopes: TokenScope[];
  /** Globs over the names inside the index (projects, repositories); absent: every name. */
  projects?: string[];
  /** When it stops being accepted; absent: never. */
  expiresAt?: Date;
}

/**
 * One `[[index.service_account]]`: the Kubernetes ServiceAccounts it names (one, or `*` for
 * every one of the namespace) may do what `scopes` say, to the names `projects` match.
 */
export interface ServiceAccountRule {
  namespace: string;
  /** A ServiceAccount name, or `*`: every ServiceAccount of the namespace. */
  name: string;
  scopes: TokenScope[];
  /** Globs over the names inside the index; absent: every name. */
  projects?: string[];
}

/**
 * One `[[index.trusted_publisher]]` of a hosted index (access/publishing/): CI runs whose OIDC
 * identity token the `issuer` signed and whose claims match every rule given here may exchange it
 * (`/_/oidc/mint-token`) for a short-lived upload token of the index.
 */
export interface TrustedPublisher {
  /** Named in logs, webhooks and status as `publisher:<name>`. */
  name: string;
  /** The `iss` the identity token must carry, exactly (`https://token.actions.githubusercontent.com`). */
  issuer: string;
  /** Claims that must be equal (`repository`, `environment`, `project_path`, ...), from the rules of config/publishers.ts. */
  claims: Record<string, string>;
  /** GitHub Actions: the workflow file name, matched in `job_workflow_ref`. */
  workflow?: string;
  /** The full git ref that ran: GitHub's `ref` claim, GitLab's `ref_path`. */
  ref?: string;
  /** Globs over the projects or repositories it may upload to; absent: every name. */
  projects?: string[];
}

/** What every index has, whatever its role. */
interface IndexBase {
  name: string;
  /** Normalised: no leading or trailing slash, segments joined by `/`. */
  route: string;
  routeSegments: string[];
  ecosystem: EcosystemId;
  policy: PolicyConfig;
  webhooks: WebhookConfig[];
  /** Named tokens (`[[index.token]]`); empty when none. */
  tokens: IndexToken[];
  /** ServiceAccount rules (`[[index.service_account]]`); empty when none. */
  serviceAccounts: ServiceAccountRule[];
  /**
   * Reads need a credential of the index (access/readers.ts): `read = "token"` on the index, or,
   * for a virtual index, on any of its members. False: anyone reads, as the spec's default.
   */
  private: boolean;
}

export interface HostedIndex extends IndexBase {
  role: 'hosted';
  /** The token writes must present; absent means uploads are disabled. */
  uploadToken?: Secret;
  /** CI identities that may mint short-lived upload tokens (`[[index.trusted_publisher]]`); empty when none. */
  trustedPublishers: TrustedPublisher[];
  volatile: boolean;
  /** What the index lets go of by itself (`untagged_after`, `keep_tags`); absent: it keeps everything. */
  retention?: RetentionRules;
  /** Bytes the index may hold (`quota_bytes`): an upload that would cross it is refused. Absent: no limit. */
  quotaBytes?: number;
}

/**
 * The retention rules of a hosted index whose ecosystem has tags (`EcosystemFacts.retention`).
 * At least one of the two is set.
 */
export interface RetentionRules {
  /** An untagged item pushed longer ago than this (seconds) is deleted, unless a kept one needs it. */
  untaggedAfterSecs?: number;
  /** Per repository: of the tags each rule's glob matches, the newest `newest` stay; older ones are untagged. */
  keepTags: KeepTagsRule[];
}

export interface KeepTagsRule {
  /** A glob over tag names: `*` any run of characters, `?` one character. */
  match: string;
  newest: number;
}

/**
 * One upstream of a cached index (`cached = "<url>"` with `upstream_username`/`upstream_password`/
 * `upstream_hosts`, or one entry of `upstreams = [...]`): where a miss is asked, with what
 * credentials (sent to its own origin, or its token realm, only), and to which other hosts it may
 * send the cache (roles/egress.ts).
 */
export interface UpstreamConfig {
  /** The upstream URL as configured (user info in it is a credential: show it through `displayUrl`). */
  url: string;
  username?: Secret;
  password?: Secret;
  /**
   * Hosts that belong to this upstream besides its own (its files host, CDN or token realm), reached
   * whatever address they resolve to (names or `*.suffix`). What else an upstream may send the
   * cache to is the ecosystem's rule (roles/egress.ts).
   */
  hosts: string[];
  /** A 404 (or 410) from this upstream asks the next one instead of being the answer (`failover_on_404`). */
  failoverOn404: boolean;
  /** How long connecting and the response headers may take (`timeout`); absent: the client's default (30 s). */
  timeoutSecs?: number;
}

/** `upstream_deletions`: follow the upstream's deletes, or keep the last good copy. */
export type UpstreamDeletions = 'follow' | 'keep';

export interface CachedIndex extends IndexBase {
  role: 'cached';
  /** The upstreams, in the order a miss asks them; never empty (a cached index without one cannot load). */
  upstreams: [UpstreamConfig, ...UpstreamConfig[]];
  upstreamConcurrency?: number;
  cacheTtlSecs: number;
  /**
   * What a stored page or tag becomes when the upstream answers that it no longer has it
   * (`upstream_deletions`): dropped (`follow`, the default), or served on as the last good copy,
   * marked, until the upstream has it again (`keep`).
   */
  upstreamDeletions: UpstreamDeletions;
  /** What the cache may keep (`max_bytes`, `evict_unused_after`); absent: it keeps everything it fetched. */
  budget?: CacheBudget;
}

/** A cached index's budget: least recently downloaded content is evicted past it. At least one is set. */
export interface CacheBudget {
  maxBytes?: number;
  /** Content not downloaded for this long (seconds) is evicted whatever the size. */
  evictUnusedAfterSecs?: number;
}

export interface VirtualIndex extends IndexBase {
  role: 'virtual';
  /** Member index names, in order. */
  members: string[];
  /** The hosted member that receives writes. */
  uploadTarget?: string;
}

/** One configured index: its role decides which settings it has (a cached one always has an upstream). */
export type IndexConfig = HostedIndex | CachedIndex | VirtualIndex;

export interface StorageConfig {
  backend: 'fs' | 's3';
  /** fs: root folder of the store. */
  path: string;
  endpoint?: string;
  bucket?: string;
  region?: string;
  prefix: string;
  accessKey?: Secret;
  secretKey?: Secret;
  /** s3: send clients to the object store for large blobs; absent: velodex serves every byte. */
  redirect?: RedirectConfig;
  /**
   * How old a document a request reads (a tag map, a manifest record, a page, holds) may be when
   * answered from this process's memory (`storage/recent-reads.ts`); 0: every read asks the store.
   */
  readCacheMs?: number;
  /**
   * s3: the processes sharing the store keep request reads in memory and drop each other's copies
   * before a write is acknowledged (`storage/peers/`); `host` is the address this process's
   * invalidation listener is reached at by the others. Absent: off.
   */
  peerCache?: { host: string };
  /**
   * s3: how long a request to the object store may wait for its answer to begin (time to first
   * byte) before it fails as the store's 503; a body then flows at its consumer's pace. Default 30.
   */
  responseTimeoutSecs?: number;
  /**
   * s3: how long a body that has begun may send no byte while velodex waits for one (its reader
   * has taken everything that came) before it fails as the store's 503 or a cut transfer. A
   * reader that is slow itself (a slow client) never trips it. Default 30.
   */
  idleTimeoutSecs?: number;
  /**
   * Bytes the staged writes of the server (uploads, pull-through fills) may hold on local disk at
   * once, all worker processes together (`storage/scratch-budget.ts`); absent: no limit.
   */
  scratchLimitBytes?: number;
  /** How long a write whose declared length does not fit what is free waits for room before a 503. Default 10. */
  scratchWaitSecs?: number;
}

/**
 * `[storage] redirect = true`: a full GET of a stored blob of at least `minSize` bytes answers
 * 307 with a presigned GET URL of the object, valid for `ttlSecs`.
 */
export interface RedirectConfig {
  minSize: number;
  ttlSecs: number;
  /** The object store's address as clients reach it, when it differs from `endpoint`. */
  endpoint?: string;
}

export interface RateClass {
  requests: number;
  windowSecs: number;
}

export type RateClassName = 'read' | 'download' | 'write' | 'admin';

/** One `trusted_proxies` entry: an address, or a network when `prefix` is below the family's width. */
export interface AddressRange {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

export interface RateLimitConfig {
  enabled: boolean;
  classes: Partial<Record<RateClassName, RateClass>>;
}

export interface TrustedPublishingConfig {
  /** The audience CI asks its identity token for (`/_/oidc/audience`); default `velodex`. */
  audience: string;
  /** How long a minted upload token lives; default 15 minutes, as PyPI's. */
  tokenLifetimeSecs: number;
}

export interface AuthConfig {
  /**
   * The key that signs and verifies the bearer tokens velodex issues; every replica must share
   * it. Absent: one is generated once (into the data dir, or the shared store with s3).
   */
  tokenSigningKey?: Secret;
}

/** `[retention]`: the schedule of retention runs. */
export interface RetentionSchedule {
  /** Seconds between runs; absent: retention runs only on demand (CLI, admin endpoint). */
  everySecs?: number;
}

export interface AdminConfig {
  /** Required by the admin surfaces when set; absent: they answer anyone (access/admin-auth.ts). */
  token?: Secret;
}

/**
 * `[kubernetes]`: where the cluster's ServiceAccount tokens are verified. Present when an index
 * has ServiceAccount rules (or the table is given); its defaults are a pod's own.
 */
export interface KubernetesConfig {
  /** What a token's `aud` must contain. */
  audience: string;
  /** The API server's origin (`https://host:port`), which serves the issuer's discovery document and keys. */
  apiServer: string;
  /** The CA bundle the API server's certificate is checked against. */
  caFile: string;
  /** The pod's own token, the bearer of the discovery requests (read again each time: the kubelet rotates it). */
  tokenFile: string;
}

/** An origin clients outside use: its host (lowercase, `:port` unless the scheme's default) and scheme. */
export interface ExternalOrigin {
  scheme: 'http' | 'https';
  host: string;
}

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** Worker processes sharing the listening socket (1: this process serves alone). */
  workers: WorkersConfig;
  logLevel: string;
  storage: StorageConfig;
  indexes: IndexConfig[];
  rateLimit: RateLimitConfig;
  /** Peers whose `X-Forwarded-*` headers are believed (client address, origin); empty: they are ignored. */
  trustedProxies: AddressRange[];
  /** `external_urls`: a request for one of these hosts is given its scheme (TLS ended in front of the registry). */
  externalUrls: ExternalOrigin[];
  /** Bounds on slow clients and the per-address connection cap. */
  connections: ConnectionsConfig;
  /** `[tls]`: serve HTTPS with this certificate and key (reloaded when the files change); absent: plain HTTP. */
  tls?: TlsConfig;
  /** `GET /metrics` and the per-request observation behind it (on by default). */
  metrics: { enabled: boolean };
  auth: AuthConfig;
  /** The token exchange of trusted publishers (access/publishing/). */
  trustedPublishing: TrustedPublishingConfig;
  admin: AdminConfig;
  retention: RetentionSchedule;
  /** `[gc]`: the online garbage collection of blobs. */
  gc: GcConfig;
  /** `[search]`: the derived search index. */
  search: SearchConfig;
  /** `[kubernetes]`; absent when no index has ServiceAccount rules and the table is not given. */
  kubernetes?: KubernetesConfig;
  /** `[[mirror]]`: the cached index that serves each upstream registry named on a request; empty: none. */
  mirrors: RegistryMirror[];
  /** Where the config came from: a file path, or `embedded default`. */
  source: string;
}
