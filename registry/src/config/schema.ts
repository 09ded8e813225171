/**
 * The shape of the TOML file, as zod schemas. Every table is strict: an unknown key is an error
 * that names it. Secrets appear here as their three spellings (`x`, `x_env`, `x_file`); the
 * loader resolves them into `Secret` values and checks that exactly one spelling is used.
 */
import { z } from 'zod';
import { DURATION_PATTERN } from './duration.js';
import { HOST_PATTERN } from './hosts.js';
import { SIZE_PATTERN } from './size.js';
import { MAX_WORKERS } from './workers.js';

const port = z.number().int().min(0).max(65535);
const positiveInt = z.number().int().positive();

/** A duration as the config spells them (config/duration.ts): seconds, or a string like "7d". */
/** A size as the config spells them (config/size.ts): bytes, or a string like "10GiB", "500Mi". */
const size = z.union([z.number().int().positive(), z.string().regex(SIZE_PATTERN, 'must be bytes or a size like "500MiB", "10Gi", "1.5GB"')]);

const duration = z.union([z.number().int().min(0), z.string().regex(DURATION_PATTERN, 'must be seconds or a duration like "7d", "12h", "1d12h"')]);

/** One `keep_tags` rule of a hosted index's retention: of the tags `match` matches, the newest `newest` stay. */
export const keepTagsSchema = z.strictObject({
  match: z.string().min(1, 'must be a non-empty glob ("*" any run of characters, "?" one character)'),
  newest: z.number({ message: 'must be a positive integer' }).int('must be a positive integer').positive('must be a positive integer (at least 1)'),
});

/** The three ways to give one secret; `secretKeys('upload_token')` yields all three keys. */
function secretFields<K extends string>(key: K) {
  return {
    [key]: z.string().optional(),
    [`${key}_env`]: z.string().optional(),
    [`${key}_file`]: z.string().optional(),
  } as { [P in K | `${K}_env` | `${K}_file`]: z.ZodOptional<z.ZodString> };
}

export const policySchema = z.strictObject({
  'max-file-size': positiveInt.optional(),
  'deny-projects': z.array(z.string()).optional(),
  'allow-projects': z.array(z.string()).optional(),
  'min-release-age': duration.optional(),
});

export const webhookSchema = z.strictObject({
  // A secret too: a chat service's incoming-webhook URL is its own credential (config/webhook.ts).
  ...secretFields('url'),
  ...secretFields('secret'),
  events: z.array(z.enum(['upload', 'yank', 'unyank', 'delete', 'restore', 'kept_after_upstream_delete'])).optional(),
});

/** One named token of an index (`[[index.token]]`, access/tokens.ts): what it may do, where, until when. */
export const tokenSchema = z.strictObject({
  // Names appear in logs, `/+status`, webhooks and the UI in place of the secret.
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit'),
  ...secretFields('secret'),
  scopes: z
    .array(z.enum(['read', 'upload', 'delete'], { message: 'must be "read", "upload" or "delete"' }))
    .min(1, 'must name at least one of "read", "upload", "delete"'),
  projects: z.array(z.string().min(1, 'must be a non-empty glob ("*" any run of characters, "?" one character)')).optional(),
  // A TOML date or offset date-time, or the same as a string (config/load.ts reads both).
  expires: z.union([z.date(), z.string()]).optional(),
});

/**
 * One `[[index.service_account]]` of an index (access/service-accounts/): which
 * Kubernetes ServiceAccounts may do what, with the same scopes and globs as a named token.
 */
export const serviceAccountSchema = z.strictObject({
  // A Kubernetes namespace name (RFC 1123 label).
  namespace: z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a Kubernetes namespace name (lower-case letters, digits and "-", at most 63)'),
  // A ServiceAccount name (RFC 1123 subdomain), or "*": every ServiceAccount of the namespace.
  name: z
    .string()
    .regex(/^(\*|[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)$/, 'must be a ServiceAccount name (lower-case letters, digits, "-" and ".") or "*" for every ServiceAccount of the namespace'),
  scopes: tokenSchema.shape.scopes,
  projects: tokenSchema.shape.projects,
});

/**
 * One trusted publisher of a hosted index (`[[index.trusted_publisher]]`, config/publishers.ts):
 * the CI identity that may mint upload tokens. Every rule given must hold for a token's claims.
 */
export const trustedPublisherSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit'),
  issuer: z.string().url('must be the issuer URL the identity tokens carry in "iss", e.g. "https://token.actions.githubusercontent.com"'),
  // GitHub Actions
  repository: z.string().min(1).optional(),
  workflow: z.string().regex(/^[^/@]+\.ya?ml$/, 'must be the workflow file name, e.g. "release.yml"').optional(),
  environment: z.string().min(1).optional(),
  // GitLab CI
  project_path: z.string().min(1).optional(),
  // Both: the full git ref, e.g. "refs/heads/main" or "refs/tags/v1.2.0"
  ref: z.string().regex(/^refs\//, 'must be a full git ref, e.g. "refs/heads/main"').optional(),
  // Any other claim that must be equal.
  claims: z.record(z.string(), z.string()).optional(),
  projects: z.array(z.string().min(1, 'must be a non-empty glob ("*" any run of characters, "?" one character)')).optional(),
});

/** `[trusted_publishing]`: what the token exchange of trusted publishers says and mints. */
export const trustedPublishingSchema = z.strictObject({
  audience: z.string().min(1).optional(),
  token_lifetime: duration.optional(),
});

/** A host an upstream may send the cache to besides its own (roles/egress.ts). */
const upstreamHost = z.string().toLowerCase().regex(HOST_PATTERN, 'must be a host name, "*." and a host name, or an IP address');

/** One entry of `upstreams = [...]` (config/upstreams.ts): an upstream of a cached index, asked in order. */
export const upstreamSchema = z.strictObject({
  url: z.string().url('must be the upstream\'s URL, e.g. "https://pypi.org/simple/" or "https://registry-1.docker.io"'),
  ...secretFields('username'),
  ...secretFields('password'),
  hosts: z.array(upstreamHost).optional(),
  failover_on_404: z.boolean().optional(),
  // Connect plus response headers (roles/upstream.ts); past it, the next upstream is asked.
  timeout: duration.optional(),
});

export const indexSchema = z.strictObject({
  // Index names become parts of storage keys and appear in URLs of the discovery documents.
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'must be 1-100 letters, digits, ".", "_" or "-", starting with a letter or digit'),
  route: z.string().min(1),
  ecosystem: z.string().optional(),
  hosted: z.boolean().optional(),
  cached: z.string().url().optional(),
  // Several upstreams, asked in order (config/upstreams.ts); `cached` is the one-upstream spelling.
  upstreams: z.array(upstreamSchema).optional(),
  members: z.array(z.string()).optional(),
  upload_target: z.string().optional(),
  ...secretFields('upload_token'),
  token: z.array(tokenSchema).optional(),
  service_account: z.array(serviceAccountSchema).optional(),
  trusted_publisher: z.array(trustedPublisherSchema).optional(),
  // Who may read: anyone (the spec's default), or only a credential of the index (access/readers.ts).
  read: z.enum(['open', 'token'], { message: 'must be "open" (anyone reads) or "token" (a token of the index is needed)' }).optional(),
  volatile: z.boolean().optional(),
  upstream_concurrency: positiveInt.optional(),
  cache_ttl_secs: z.number().int().min(0).optional(),
  // What a cached copy becomes once its upstream no longer has it (roles/revalidator.ts).
  upstream_deletions: z
    .enum(['follow', 'keep'], { message: 'must be "follow" (drop what the upstream deleted) or "keep" (serve the last good copy)' })
    .optional(),
  // Hosts that belong to the upstream besides its own (a files host, a CDN, a token realm): roles/egress.ts.
  upstream_hosts: z.array(upstreamHost).optional(),
  ...secretFields('upstream_username'),
  ...secretFields('upstream_password'),
  policy: policySchema.optional(),
  webhook: z.array(webhookSchema).optional(),
  // Retention of a hosted index whose ecosystem has tags (config/load.ts refuses it elsewhere).
  untagged_after: duration.optional(),
  keep_tags: z.array(keepTagsSchema).optional(),
  // Storage limits (config/load.ts): a quota on a hosted index, a budget on a cached one.
  quota_bytes: size.optional(),
  max_bytes: size.optional(),
  evict_unused_after: duration.optional(),
});

/** `[retention]`: when the retention rules of the indexes run by themselves. */
export const retentionSchema = z.strictObject({
  every: duration.optional(),
});

export const storageSchema = z.strictObject({
  backend: z.enum(['fs', 's3']).optional(),
  path: z.string().optional(),
  endpoint: z.string().url().optional(),
  bucket: z.string().optional(),
  region: z.string().optional(),
  prefix: z.string().optional(),
  ...secretFields('access_key'),
  ...secretFields('secret_key'),
  // s3 only: full GETs of large stored blobs answer 307 to a presigned URL (load.ts checks the backend).
  redirect: z.boolean().optional(),
  redirect_min_size: z.number().int().min(0).optional(),
  // S3 caps a presigned URL's lifetime at seven days.
  redirect_ttl_secs: z.number().int().min(1).max(604800).optional(),
  redirect_endpoint: z.string().url().optional(),
  // Opt-in bounded staleness of request reads (storage/recent-reads.ts); 0, the default, is off.
  read_cache_ms: z.number().int().min(0).max(60_000).optional(),
  // s3 only: the processes keep request reads in memory and drop each other's copies before a
  // write is acknowledged (storage/peers/); peer_host is where the others reach this one.
  peer_cache: z.boolean().optional(),
  peer_host: z.string().min(1).optional(),
  // s3 only: how long a request waits for the store's answer to begin (not the whole transfer).
  response_timeout_secs: z.number().int().min(1).max(600).optional(),
  // s3 only: how long a body that has begun may send nothing while its reader waits for bytes.
  idle_timeout_secs: z.number().int().min(1).max(600).optional(),
  // What staged uploads and fills may hold on local disk at once (storage/scratch-budget.ts); absent: no limit.
  scratch_limit: size.optional(),
  // How long a declared length waits for scratch space before a 503 (0: refused at once).
  scratch_wait_secs: z.number().int().min(0).max(300).optional(),
});

const rateClassSchema = z.strictObject({ requests: positiveInt, window_secs: positiveInt });

export const rateLimitSchema = z.strictObject({
  enabled: z.boolean().optional(),
  read: rateClassSchema.optional(),
  download: rateClassSchema.optional(),
  write: rateClassSchema.optional(),
  admin: rateClassSchema.optional(),
  // The older spelling of the top-level `trusted_proxies` (config/trusted-proxies.ts), still accepted.
  trusted_proxies: z.array(z.string()).optional(),
});

/** Whole seconds, at least one: every bound of `[connections]` stays on (config/connections.ts). */
const boundSecs = z.number().int().min(1).max(86400);

export const connectionsSchema = z.strictObject({
  headers_timeout_secs: boundSecs.optional(),
  body_idle_timeout_secs: boundSecs.optional(),
  keep_alive_timeout_secs: boundSecs.optional(),
  // 0: no cap.
  max_per_client: z.number().int().min(0).max(1_000_000).optional(),
  // 0: no drain. At most a minute: a stop must fit in the orchestrator's grace period.
  drain_secs: z.number().int().min(0).max(60).optional(),
});

/** The bearer tokens velodex issues itself (a token realm an ecosystem serves, as the OCI one does for docker). */
export const authSchema = z.strictObject({
  ...secretFields('token_signing_key'),
});

/** The token that opens the admin surfaces (`/+status?details=admin`, `/admin/status`). */
export const adminSchema = z.strictObject({
  ...secretFields('token'),
});

/**
 * Where the cluster's ServiceAccount tokens are verified (config/kubernetes.ts): needed only
 * when an index has `[[index.service_account]]` rules; every key has an in-pod default.
 */
export const kubernetesSchema = z.strictObject({
  audience: z.string().min(1, 'must be a non-empty audience').optional(),
  api_server: z.string().url().optional(),
  ca_file: z.string().min(1).optional(),
  token_file: z.string().min(1).optional(),
});

/** Serving HTTPS (config/tls.ts): both paths, or no table. */
export const tlsSchema = z.strictObject({
  cert_file: z.string().min(1, 'must be the path of a PEM certificate chain').optional(),
  key_file: z.string().min(1, 'must be the path of a PEM private key').optional(),
});

/** The online garbage collection of blobs (config/gc.ts). */
export const gcSchema = z.strictObject({
  enabled: z.boolean().optional(),
  every: duration.optional(),
  grace: duration.optional(),
  lease: duration.optional(),
  // How often cached indexes with a budget are brought within it (lifecycle/budget/).
  evict_every: duration.optional(),
  // The share of one core a collection may use (lifecycle/pace.ts).
  cpu_share: z.number().gt(0, 'must be above 0').max(1, 'must be at most 1 (a whole core)').optional(),
});

/**
 * One `[[mirror]]` (config/mirrors.ts): the cached index that serves requests naming `registry`
 * (containerd's `ns`). Hosts are checked and folded there, where the ecosystem's aliases are known.
 */
export const mirrorSchema = z.strictObject({
  registry: z.string({ message: 'must be a registry host, e.g. "docker.io"' }),
  index: z.string({ message: 'must be the name of a cached index' }),
});

/** The derived search index (config/search.ts). */
export const searchSchema = z.strictObject({
  enabled: z.boolean().optional(),
  // How often each process reads every index's summary for writes of other processes (seconds).
  refresh_secs: z.number().min(0.1, 'must be at least 0.1 (seconds)').max(3600, 'must be at most 3600 (an hour)').optional(),
});

export const fileSchema = z.strictObject({
  host: z.string().optional(),
  port: port.optional(),
  data_dir: z.string().optional(),
  // Worker processes sharing the listening socket: a count, or "auto" (config/workers.ts).
  workers: z.union([z.literal('auto'), z.number().int().min(1).max(MAX_WORKERS)]).optional(),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional(),
  storage: storageSchema.optional(),
  index: z.array(indexSchema).optional(),
  rate_limit: rateLimitSchema.optional(),
  // IPs and CIDRs whose X-Forwarded-* headers are believed; checked in config/trusted-proxies.ts.
  trusted_proxies: z.array(z.string()).optional(),
  // Where clients outside reach the registry (config/external-urls.ts).
  external_urls: z.array(z.string().max(300)).max(16).optional(),
  connections: connectionsSchema.optional(),
  tls: tlsSchema.optional(),
  metrics: z.strictObject({ enabled: z.boolean().optional() }).optional(),
  auth: authSchema.optional(),
  trusted_publishing: trustedPublishingSchema.optional(),
  admin: adminSchema.optional(),
  retention: retentionSchema.optional(),
  gc: gcSchema.optional(),
  search: searchSchema.optional(),
  kubernetes: kubernetesSchema.optional(),
  mirror: z.array(mirrorSchema).optional(),
});

export type FileConfig = z.infer<typeof fileSchema>;
export type TrustedPublisherFileConfig = z.infer<typeof trustedPublisherSchema>;
export type IndexFileConfig = z.infer<typeof indexSchema>;
export type UpstreamFileConfig = z.infer<typeof upstreamSchema>;
export type WebhookFileConfig = z.infer<typeof webhookSchema>;
export type TokenFileConfig = z.infer<typeof tokenSchema>;
export type ServiceAccountFileConfig = z.infer<typeof serviceAccountSchema>;
export type KubernetesFileConfig = z.infer<typeof kubernetesSchema>;
export type MirrorFileConfig = z.infer<typeof mirrorSchema>;
