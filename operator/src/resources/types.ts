/**
 * The two custom resources as the operator reads them (crds/*.yaml hold the schemas the API
 * server enforces; test/operator/crd-types.test.ts fails when the two disagree on a field, its
 * required-ness, its enum or its basic type). Optional fields stay optional here: the CRDs have no
 * defaults, the operator applies them and reports the effective values in status.
 */

export const GROUP = 'velodex.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface SecretKeyRef {
  name: string;
  key: string;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

export interface IndexPolicy {
  maxFileSize?: number;
  denyProjects?: string[];
  allowProjects?: string[];
  minReleaseAge?: string;
}

/**
 * Retention of a hosted OCI index (docs/storage-lifecycle.md): rendered as `untagged_after` and
 * `keep_tags` of its `[[index]]`.
 */
export interface IndexRetention {
  /** Seconds, or a duration like "14d", "12h", "1d12h". */
  untaggedAfter?: string;
  keepTags?: KeepTagsRule[];
}

export interface KeepTagsRule {
  match: string;
  newest: number;
}

/** What a webhook may subscribe to (docs/webhooks.md). */
export type WebhookEvent = 'upload' | 'yank' | 'unyank' | 'delete' | 'restore' | 'kept_after_upstream_delete';

/** Exactly one of `url` and `urlSecretRef` (the CRD and the plan both check it). */
export interface IndexWebhook {
  /** A URL without user info: credentials never go in a resource. */
  url?: string;
  /** The whole URL from a Secret, for receivers whose path is their key (chat incoming webhooks). */
  urlSecretRef?: SecretKeyRef;
  events?: WebhookEvent[];
  secretRef?: SecretKeyRef;
}

/** What a named token may do (docs/access.md): `delete` covers yank, delete, restore, promote and OCI deletes. */
export type TokenScope = 'read' | 'upload' | 'delete';

/**
 * A named token of an index, rendered as an `[[index.token]]` table (its secret as `secret_file`).
 * `upload` and `delete` only on a hosted index: a virtual index's writes land in its upload
 * target, whose tokens apply (the CRD and the plan both check it).
 */
export interface IndexToken {
  /** What logs, `/+status`, webhooks and the UI show; unique within the index. */
  name: string;
  secretRef: SecretKeyRef;
  scopes: TokenScope[];
  /** Globs over project names or repository paths (`*`, `?`); absent: every project. */
  projects?: string[];
  /** An RFC 3339 date-time with an offset, or a date ("2027-06-30"); passed on as a string. */
  expires?: string;
}

/**
 * Kubernetes ServiceAccounts that may use the index with their own token (docs/access.md),
 * rendered as an `[[index.service_account]]` table. `name` is a ServiceAccount or `*` (every one
 * of the namespace); a rule naming a ServiceAccount wins over its namespace's `*`. `upload` and
 * `delete` only on a hosted index, as for tokens.
 */
export interface ServiceAccountGrant {
  /** Default: the PackageIndex's own namespace. */
  namespace?: string;
  name: string;
  scopes: TokenScope[];
  /** Globs over project names or repository paths; absent: every project. */
  projects?: string[];
}

/**
 * A CI identity that may mint upload tokens of a hosted index (docs/access.md#trusted-publishing),
 * rendered as an `[[index.trusted_publisher]]` table: every rule given must hold for the identity
 * token's claims.
 */
export interface TrustedPublisherSpec {
  name: string;
  issuer: string;
  repository?: string;
  workflow?: string;
  environment?: string;
  projectPath?: string;
  ref?: string;
  claims?: Record<string, string>;
  projects?: string[];
}

/** Who may use the index besides its tokens. */
export interface IndexAccess {
  serviceAccounts?: ServiceAccountGrant[];
  trustedPublishers?: TrustedPublisherSpec[];
}

/** A Secret with an upstream's username and password, under these keys (defaults below). */
export interface UpstreamCredentialsRef {
  name: string;
  usernameKey?: string;
  passwordKey?: string;
}

export const DEFAULT_UPSTREAM_USERNAME_KEY = 'username';
export const DEFAULT_UPSTREAM_PASSWORD_KEY = 'password';

/** The two Secret keys an upstream credentials reference names, defaults applied. */
export function upstreamCredentialKeys(ref: UpstreamCredentialsRef): { username: SecretKeyRef; password: SecretKeyRef } {
  return {
    username: { name: ref.name, key: ref.usernameKey ?? DEFAULT_UPSTREAM_USERNAME_KEY },
    password: { name: ref.name, key: ref.passwordKey ?? DEFAULT_UPSTREAM_PASSWORD_KEY },
  };
}

/**
 * One of several upstreams of a cached index (`spec.upstreams`, rendered as `upstreams = [...]`),
 * asked in order: its own credentials and hosts; `failoverOn404` lets a 404 from it ask the next.
 */
export interface UpstreamSpec {
  url: string;
  /** Hosts that belong to this upstream besides its own (its files host, CDN or token realm). */
  hosts?: string[];
  credentialsSecretRef?: UpstreamCredentialsRef;
  failoverOn404?: boolean;
  /** How long connecting and the response headers may take before the next upstream is asked (a duration like "5s"). */
  timeout?: string;
}

export interface PackageIndexSpec {
  registry?: string;
  route: string;
  ecosystem: 'python' | 'oci';
  role: 'hosted' | 'cached' | 'virtual';
  upstream?: string;
  /** Several upstreams, asked in order (instead of `upstream`, `upstreamHosts` and `upstreamCredentialsSecretRef`). */
  upstreams?: UpstreamSpec[];
  upstreamConcurrency?: number;
  /** Hosts that belong to the upstream besides its own (rendered as `upstream_hosts`). */
  upstreamHosts?: string[];
  cacheTtlSeconds?: number;
  /** Cached only: follow the upstream's deletes (the default) or keep the last good copy (rendered as `upstream_deletions`). */
  upstreamDeletions?: 'follow' | 'keep';
  upstreamCredentialsSecretRef?: UpstreamCredentialsRef;
  uploadTokenSecretRef?: SecretKeyRef;
  /** Named tokens beside the upload token (rendered as `[[index.token]]`). */
  tokens?: IndexToken[];
  /** Identities besides tokens: Kubernetes ServiceAccounts (rendered as `[[index.service_account]]`). */
  access?: IndexAccess;
  volatile?: boolean;
  /** Who may read (rendered as `read`): anyone (`open`, the default) or only a credential of the index (`token`). */
  read?: 'open' | 'token';
  members?: string[];
  uploadTarget?: string;
  policy?: IndexPolicy;
  webhooks?: IndexWebhook[];
  /** Hosted OCI only. */
  retention?: IndexRetention;
  /**
   * Hosted only: the most the index may store (rendered as `quota_bytes`); an upload that would
   * cross it is refused. Bytes as an integer, or a size like "500Mi", "10GiB", "1.5G".
   */
  quotaBytes?: ByteSize;
  /** Cached only: the cache budget (rendered as `max_bytes`); least recently downloaded content is evicted past it. */
  maxBytes?: ByteSize;
  /** Cached only: content not downloaded for this long is evicted (rendered as `evict_unused_after`). */
  evictUnusedAfter?: string;
}

/**
 * A size as the CRD takes it (`x-kubernetes-int-or-string`): bytes, or digits with an optional
 * fraction and a unit (B, k/K/KB, M/MB, G/GB, T/TB decimal; Ki/KiB, Mi/MiB, Gi/GiB, Ti/TiB binary).
 */
export type ByteSize = number | string;

/** The registry's last garbage collection as its pods report it (it runs over every index at once). */
export interface LastCollection {
  /** When it ended. */
  time: string;
  result: 'ok' | 'failed';
  reclaimedBytes: number;
}

export interface PackageIndexStatus {
  observedGeneration?: number;
  registry?: string;
  url?: string;
  upstreamOffline?: boolean;
  /**
   * The same fact for the UPSTREAM printer column (a boolean column would read as "no upstream"):
   * `online` or `offline` for one upstream, `2/3 online` for several (the fewest any pod sees).
   */
  upstream?: string;
  /** The index's change counter as its pods report it (the highest). */
  serial?: number;
  /** Ready pods of the registry, and how many of them serve this index. */
  pods?: number;
  servingPods?: number;
  /** What the index stores, as its pods count it (a blob it shares with another index counts in both). */
  storedBytes?: number;
  /** `storedBytes` for people (the SIZE column): binary units, one decimal, like "12.3 MiB". */
  size?: string;
  lastCollection?: LastCollection;
  conditions?: Condition[];
}

export interface PackageIndex {
  apiVersion: typeof API_VERSION;
  kind: 'PackageIndex';
  metadata: ObjectMeta;
  spec: PackageIndexSpec;
  status?: PackageIndexStatus;
}

export interface RateClass {
  requests: number;
  windowSeconds: number;
}

export interface PackageRegistrySpec {
  replicas?: number;
  image?: string;
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  storage: {
    endpoint: string;
    bucket: string;
    region?: string;
    prefix?: string;
    credentialsSecretRef: { name: string; accessKeyKey?: string; secretKeyKey?: string };
    /** Large blob and file GETs answered with a presigned URL of the object store (docs/storage.md). */
    redirect?: { minSize?: number; ttlSeconds?: number; endpoint?: string };
    /** `[storage] read_cache_ms`: how stale a request read may be, in ms; absent or 0: off. */
    readCacheMs?: number;
    /**
     * `[storage] peer_cache`: each pod keeps the documents its requests read in memory with no time
     * bound, and every write drops the other pods' copies before it is acknowledged. The pods reach
     * each other's listeners at their pod IP (`VELODEX_PEER_HOST`), on a port of their choosing.
     * Not with `readCacheMs` (the CRD and the registry's config check both refuse it).
     */
    peerCache?: boolean;
    /** `[storage] response_timeout_secs`: how long a request waits for the object store's answer to begin (default 30). */
    responseTimeoutSeconds?: number;
    /** `[storage] idle_timeout_secs`: how long a body from the object store may send nothing while a pod waits for it (default 30). */
    idleTimeoutSeconds?: number;
  };
  rateLimit?: {
    enabled?: boolean;
    trustedProxies?: string[];
    read?: RateClass;
    download?: RateClass;
    write?: RateClass;
    admin?: RateClass;
  };
  service?: { type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer'; port?: number };
  resources?: Record<string, unknown>;
  logLevel?: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** The admin token of `/admin/status` and `/+status?details=admin` (rendered as `[admin] token_file`). */
  adminTokenSecretRef?: SecretKeyRef;
  /** When the retention rules of its indexes run by themselves (rendered as `[retention] every`). */
  retention?: { every?: string };
  /** The garbage collection of blobs (rendered as `[gc]`; absent fields keep the registry's defaults). */
  gc?: RegistryGc;
  /**
   * HTTPS on the pods with the certificate of a `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`;
   * labelled velodex.dev/allow-reference=true), rendered as `[tls]`. A renewed certificate is
   * served without a roll: the pods re-read the mounted files (docs/tls.md).
   */
  tls?: RegistryTls;
  /**
   * How the pods spread over nodes (and zones): absent, one pod per node and per zone where the
   * scheduler can (`ScheduleAnyway`); given, these constraints instead (`[]`: none). Their
   * `labelSelector` defaults to the registry's pods.
   */
  topologySpreadConstraints?: Record<string, unknown>[];
  /** A HorizontalPodAutoscaler on CPU: `replicas` is then its to set, between these bounds. */
  autoscaling?: RegistryAutoscaling;
  /** The pods' scratch space (an `emptyDir`, where uploads and pulled files are staged). */
  scratch?: { sizeLimit?: string };
  /** A NetworkPolicy for the pods: who may reach them, and where they may connect. */
  networkPolicy?: RegistryNetworkPolicy;
  /** Makes the registry the node mirror of these upstream registries (rendered as `[[mirror]]`; docs/cluster-mirror.md). */
  nodeMirror?: NodeMirror;
  /**
   * An Ingress to the registry's Service for clients outside the cluster: its host becomes the
   * registry's address in `status.url`, the indexes' URLs and `/+api` (rendered as `external_urls`).
   */
  ingress?: RegistryIngress;
  /**
   * A Gateway API HTTPRoute to the registry's Service, attached to the Gateways named: its host is
   * the registry's external address as with `ingress` (one of the two, never both).
   */
  gatewayRoute?: RegistryGatewayRoute;
}

/** Where the HTTPRoute attaches: a Gateway, and optionally one of its listeners. */
export interface GatewayParentRef {
  name: string;
  /** Default: the registry's namespace. */
  namespace?: string;
  /** The Gateway's listener by name. */
  sectionName?: string;
  /** The Gateway's listener by port. */
  port?: number;
}

export interface RegistryGatewayRoute {
  /** The name clients outside use, e.g. "registry.example.com". */
  host: string;
  parentRefs: GatewayParentRef[];
  /**
   * How clients reach `host`: `https` (the default) when the Gateway's listener terminates TLS for
   * it, `http` when it does not. The route cannot see the listener, so the spec says it.
   */
  scheme?: 'https' | 'http';
  /** Annotations of the HTTPRoute, for its Gateway's controller. */
  annotations?: Record<string, string>;
}

export interface RegistryIngress {
  /** The name clients outside use, e.g. "registry.example.com". */
  host: string;
  /** The IngressClass; absent: the cluster's default class. */
  className?: string;
  /**
   * The `kubernetes.io/tls` Secret the Ingress controller serves for `host` (cert-manager fills it
   * when the Ingress carries its annotation); given, clients reach the registry at https://host.
   */
  tlsSecretName?: string;
  /** Annotations of the Ingress, for its controller (and cert-manager). */
  annotations?: Record<string, string>;
}

/** The upstream registries a node's containerd pulls through this registry's one endpoint (`?ns=`). */
export interface NodeMirror {
  registries: NodeMirrorRegistry[];
}

export interface NodeMirrorRegistry {
  /** The registry's host as image references name it: "docker.io", "ghcr.io", "10.0.0.5:5000". */
  registry: string;
  /** The cached oci PackageIndex of this registry that serves it. */
  index: string;
}

export interface RegistryAutoscaling {
  minReplicas?: number;
  maxReplicas: number;
  /** Average CPU use, in percent of the pods' CPU request, the autoscaler keeps to (default 70). */
  targetCPUUtilizationPercentage?: number;
}

/**
 * `from`: NetworkPolicy peers that may reach the pods (absent: every pod of every namespace, and
 * nothing outside the cluster's pods). `egress`: peers the pods may connect to besides DNS (the
 * object store, the upstreams); absent: anywhere.
 */
export interface RegistryNetworkPolicy {
  from?: Record<string, unknown>[];
  egress?: Record<string, unknown>[];
}

export interface RegistryTls {
  secretName: string;
  /** A cert-manager Certificate the operator requests, which fills `secretName`. */
  certManager?: RegistryCertManager;
}

/**
 * The Certificate the operator renders: its issuer, and the names it is for (absent: the
 * Service's in-cluster names and the external host of `ingress` or `gatewayRoute`).
 */
export interface RegistryCertManager {
  issuerRef: { name: string; kind?: 'Issuer' | 'ClusterIssuer' };
  dnsNames?: string[];
}

/** The keys of a `kubernetes.io/tls` Secret. */
export const TLS_CERT_KEY = 'tls.crt';
export const TLS_KEY_KEY = 'tls.key';

/** `[gc]` of the registry (docs/storage-lifecycle.md); durations are seconds or like "6h", "1d". */
export interface RegistryGc {
  enabled?: boolean;
  every?: string;
  grace?: string;
  lease?: string;
  /** How often cached indexes with a budget are brought within it (`evict_every`). */
  evictEvery?: string;
  /** The share of one core a collection may use, above 0, at most 1 (`cpu_share`). */
  cpuShare?: number;
}

export interface PackageRegistryStatus {
  observedGeneration?: number;
  replicas?: number;
  readyReplicas?: number;
  indexes?: number;
  url?: string;
  configChecksum?: string;
  /** The versions its answering pods run (the VERSION column): two during a roll to a new image. */
  version?: string;
  /** What the registry stores in all (a blob two indexes hold counts once). */
  storedBytes?: number;
  /** `storedBytes` for people (the SIZE column). */
  size?: string;
  lastCollection?: LastCollection;
  conditions?: Condition[];
}

export interface PackageRegistry {
  apiVersion: typeof API_VERSION;
  kind: 'PackageRegistry';
  metadata: ObjectMeta;
  spec: PackageRegistrySpec;
  status?: PackageRegistryStatus;
}
