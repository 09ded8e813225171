/**
 * Turns a TOML file (or the embedded default) plus flags and `VELODEX_*` variables into a
 * validated `Config`. Precedence: flag, then environment, then file, then default. Every problem
 * is a `ConfigError` naming the key, the index and the fix; nothing half-loads.
 */
import { resolveExternalUrls } from './external-urls.js';
import { readFileSync } from 'node:fs';
import { parse as parseToml, TomlError } from 'smol-toml';
import type { z } from 'zod';
import type { EcosystemFacts } from './ecosystem-facts.js';
import { ConfigError } from './errors.js';
import { fileSchema, type FileConfig, type IndexFileConfig } from './schema.js';
import type { Secret } from './secret.js';
import { processSecretSources, resolveSecret, secretSpellings, type SecretSources } from './resolve-secret.js';
import type { CacheBudget, Config, IndexConfig, RetentionRules, RetentionSchedule, StorageConfig } from './types.js';
import { resolveConnections } from './connections.js';
import { resolveTls } from './tls.js';
import { resolveTrustedProxies } from './trusted-proxies.js';
import { resolveTokens } from './tokens.js';
import { resolveKubernetes, resolveServiceAccounts } from './kubernetes.js';
import { resolvePublishers, resolveTrustedPublishing } from './publishers.js';
import { resolveWebhook } from './webhook.js';
import { embeddedDefault } from './default.js';
import { parseWorkersSetting, resolveWorkers, type WorkersSetting } from './workers.js';
import { checkRoute } from './routes.js';
import { parseDuration } from './duration.js';
import { parseSize } from './size.js';
import { resolveGc } from './gc.js';
import { resolveMirrors } from './mirrors.js';
import { resolveUpstreams } from './upstreams.js';
import { resolveSearch } from './search.js';

export interface Overrides {
  host?: string;
  port?: number;
  dataDir?: string;
  workers?: WorkersSetting;
}

export interface LoadOptions {
  /** The ecosystems this build serves; the first is the default of an index without `ecosystem`. */
  ecosystems: readonly EcosystemFacts[];
  overrides?: Overrides;
  env?: NodeJS.ProcessEnv;
  /**
   * Reads `_file` secrets (default: the file system). The operator checks a config before any pod
   * mounts its Secrets, so it answers for the mount paths from the Secrets' data.
   */
  readSecretFile?: (path: string) => string;
}

export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_PORT = 4433;
export const DEFAULT_DATA_DIR = 'velodex-data';
export const DEFAULT_CACHE_TTL_SECS = 300;

/** Reads and validates a config file. */
export function loadConfigFile(path: string, opts: LoadOptions): Config {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(path, `cannot read the config file (${(err as NodeJS.ErrnoException).code ?? String(err)})`, 'pass an existing file to --config');
  }
  return parseConfigText(text, path, opts);
}

/** Validates config text; `source` names it in messages (a path, or where it came from). */
export function parseConfigText(text: string, source: string, opts: LoadOptions): Config {
  let raw: unknown;
  try {
    raw = parseToml(text);
  } catch (err) {
    const where = err instanceof TomlError ? `${source}:${err.line}:${err.column}` : source;
    throw new ConfigError(where, `not valid TOML: ${(err as Error).message.split('\n')[0]}`);
  }
  return buildConfig(raw, source, opts);
}

/** The config used when no file is given: one hosted index of every ecosystem. */
export function loadEmbeddedDefault(opts: LoadOptions): Config {
  const env = opts.env ?? process.env;
  const dataDir = opts.overrides?.dataDir ?? env.VELODEX_DATA_DIR ?? DEFAULT_DATA_DIR;
  return buildConfig(embeddedDefault(dataDir, env, opts.ecosystems), 'embedded default', opts);
}

export function buildConfig(raw: unknown, source: string, { ecosystems, overrides = {}, env = process.env, readSecretFile }: LoadOptions): Config {
  const secrets: SecretSources = readSecretFile ? { env, readFile: readSecretFile } : processSecretSources(env);
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) throw zodToConfigError(parsed.error, raw);
  const file: FileConfig = parsed.data;

  const host = overrides.host ?? env.VELODEX_HOST ?? file.host ?? DEFAULT_HOST;
  const port = overrides.port ?? parsePortEnv(env.VELODEX_PORT) ?? file.port ?? DEFAULT_PORT;
  const dataDir = overrides.dataDir ?? env.VELODEX_DATA_DIR ?? file.data_dir ?? DEFAULT_DATA_DIR;
  const workerEnv = env.VELODEX_WORKERS ? parseWorkersSetting(env.VELODEX_WORKERS, 'VELODEX_WORKERS') : undefined;
  const workers = resolveWorkers(overrides.workers ?? workerEnv ?? file.workers, env);

  const indexes = (file.index ?? []).map((ix, i) => withinIndex(ix.name, () => resolveIndex(ix, i, secrets, ecosystems)));
  checkIndexes(indexes);
  markPrivateViews(indexes);

  const s = file.storage ?? {};
  const storage: StorageConfig = {
    backend: s.backend ?? 'fs',
    path: s.path ?? `${dataDir}/store`,
    endpoint: s.endpoint,
    bucket: s.bucket,
    region: s.region,
    prefix: s.prefix ?? '',
    accessKey: resolveSecret(s, 'access_key', 'storage', secrets),
    secretKey: resolveSecret(s, 'secret_key', 'storage', secrets),
    redirect: redirectConfig(s),
    readCacheMs: s.read_cache_ms ?? 0,
    ...(s.peer_cache ? { peerCache: { host: env.VELODEX_PEER_HOST ?? s.peer_host ?? '127.0.0.1' } } : {}),
    ...(s.response_timeout_secs !== undefined ? { responseTimeoutSecs: s.response_timeout_secs } : {}),
    ...(s.idle_timeout_secs !== undefined ? { idleTimeoutSecs: s.idle_timeout_secs } : {}),
    ...(s.scratch_limit !== undefined ? { scratchLimitBytes: sizeOf(s.scratch_limit, 'storage.scratch_limit') } : {}),
    ...(s.scratch_wait_secs !== undefined ? { scratchWaitSecs: s.scratch_wait_secs } : {}),
  };
  if (storage.backend === 's3') {
    for (const key of ['endpoint', 'bucket'] as const) {
      if (!storage[key]) throw new ConfigError(`storage.${key}`, 'is required with backend = "s3"', `set storage.${key}`);
    }
    for (const [key, secret] of [['access_key', storage.accessKey], ['secret_key', storage.secretKey]] as const) {
      if (!secret) throw new ConfigError(`storage.${key}`, 'is required with backend = "s3"', `set one of ${key}, ${key}_env, ${key}_file`);
    }
    if (storage.peerCache && storage.readCacheMs) {
      throw new ConfigError('storage.peer_cache', 'cannot be combined with read_cache_ms', 'choose one: peer_cache keeps every write visible at once, read_cache_ms serves copies up to its bound');
    }
  } else {
    for (const [key, value] of [['response_timeout_secs', storage.responseTimeoutSecs], ['idle_timeout_secs', storage.idleTimeoutSecs], ['peer_cache', s.peer_cache || undefined]] as const) {
      if (value !== undefined) throw new ConfigError(`storage.${key}`, 'is for the object store (backend = "s3")', 'remove it, or use the s3 backend');
    }
  }

  const tls = resolveTls(file.tls);
  const rl = file.rate_limit ?? {};
  const classes: Config['rateLimit']['classes'] = {};
  for (const cls of ['read', 'download', 'write', 'admin'] as const) {
    const c = rl[cls];
    if (c) classes[cls] = { requests: c.requests, windowSecs: c.window_secs };
  }

  return {
    host,
    port,
    dataDir,
    workers,
    logLevel: env.VELODEX_LOG_LEVEL ?? file.log_level ?? 'info',
    storage,
    indexes,
    rateLimit: { enabled: rl.enabled ?? false, classes },
    trustedProxies: resolveTrustedProxies(file),
    externalUrls: resolveExternalUrls(file.external_urls),
    connections: resolveConnections(file.connections),
    ...(tls ? { tls } : {}),
    metrics: { enabled: file.metrics?.enabled ?? true },
    auth: { tokenSigningKey: signingKey(file.auth ?? {}, secrets) },
    trustedPublishing: resolveTrustedPublishing(file.trusted_publishing),
    admin: { token: resolveSecret(file.admin ?? {}, 'token', 'admin', secrets) },
    retention: retentionSchedule(file.retention),
    gc: resolveGc(file.gc),
    search: resolveSearch(file.search),
    ...kubernetesOf(file.kubernetes, indexes, env),
    mirrors: resolveMirrors(file.mirror, indexes, ecosystems),
    source,
  };
}

function kubernetesOf(table: FileConfig['kubernetes'], indexes: readonly IndexConfig[], env: NodeJS.ProcessEnv): Pick<Config, 'kubernetes'> {
  const kubernetes = resolveKubernetes(table, indexes.some((ix) => ix.serviceAccounts.length > 0), env);
  return kubernetes ? { kubernetes } : {};
}

/** 1 MiB: below it a redirect's extra round trip costs the client more than velodex saves. */
export const DEFAULT_REDIRECT_MIN_SIZE = 1024 * 1024;
/** Five minutes: long enough to start a download, short enough that a leaked URL soon stops working. */
export const DEFAULT_REDIRECT_TTL_SECS = 300;

function redirectConfig(s: NonNullable<FileConfig['storage']>): StorageConfig['redirect'] {
  const tuned = (['redirect_min_size', 'redirect_ttl_secs', 'redirect_endpoint'] as const).find((k) => s[k] !== undefined);
  if (!s.redirect) {
    if (tuned) throw new ConfigError(`storage.${tuned}`, 'has no effect without storage.redirect = true', 'set storage.redirect = true, or remove the key');
    return undefined;
  }
  if ((s.backend ?? 'fs') !== 's3') {
    throw new ConfigError('storage.redirect', 'needs backend = "s3" (clients are sent to presigned URLs of the object store)', 'remove storage.redirect, or use the s3 backend');
  }
  return {
    minSize: s.redirect_min_size ?? DEFAULT_REDIRECT_MIN_SIZE,
    ttlSecs: s.redirect_ttl_secs ?? DEFAULT_REDIRECT_TTL_SECS,
    ...(s.redirect_endpoint !== undefined ? { endpoint: s.redirect_endpoint } : {}),
  };
}

/** Below this many characters a signing key could be guessed offline from one token it signed. */
export const MIN_SIGNING_KEY_LENGTH = 32;

function signingKey(auth: NonNullable<FileConfig['auth']>, secrets: SecretSources): Secret | undefined {
  const key = resolveSecret(auth, 'token_signing_key', 'auth', secrets);
  if (key && key.reveal().length < MIN_SIGNING_KEY_LENGTH) {
    throw new ConfigError(
      `auth.token_signing_key${key.source === 'inline' ? '' : key.source.startsWith('env:') ? '_env' : '_file'}`,
      `is ${key.reveal().length} characters long; at least ${MIN_SIGNING_KEY_LENGTH} are needed`,
      'generate one with: openssl rand -base64 48',
    );
  }
  return key;
}

function parsePortEnv(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) {
    throw new ConfigError('VELODEX_PORT', `"${value}" is not a port number`, 'use an integer from 0 to 65535');
  }
  return n;
}

/** Every problem met while resolving one `[[index]]` is in that index (`ConfigError.index`). */
function withinIndex<T>(name: string, resolve: () => T): T {
  try {
    return resolve();
  } catch (err) {
    throw err instanceof ConfigError ? err.inIndex(name) : err;
  }
}

function resolveIndex(ix: IndexFileConfig, position: number, secrets: SecretSources, ecosystems: readonly EcosystemFacts[]): IndexConfig {
  const where = `index "${ix.name}" (index[${position}])`;
  const roles: IndexConfig['role'][] = [];
  if (ix.hosted) roles.push('hosted');
  if (ix.cached !== undefined || ix.upstreams !== undefined) roles.push('cached');
  if (ix.members !== undefined) roles.push('virtual');
  if (roles.length !== 1) {
    throw new ConfigError(
      where,
      roles.length === 0 ? 'has no role' : `has several roles (${roles.join(', ')})`,
      'give exactly one of hosted = true, cached = "<upstream URL>" (or upstreams = [...]), members = [...]',
    );
  }
  const role = roles[0]!;
  const ecosystem = ix.ecosystem === undefined ? ecosystems[0] : ecosystems.find((e) => e.id === ix.ecosystem);
  if (!ecosystem) {
    throw new ConfigError(`${where}.ecosystem`, `"${ix.ecosystem}" is not an ecosystem this build serves`, `use one of ${ecosystems.map((e) => `"${e.id}"`).join(', ')}`);
  }
  if (!ecosystem.roles.includes(role)) {
    // What this build does not do yet is refused by name, not accepted and ignored.
    throw new ConfigError(where, `a ${role} ${ecosystem.id} index is not available in this build yet`, `use a ${ecosystem.roles.join(' or ')} index`);
  }
  const routeSegments = checkRoute(ix.route, ecosystem, `${where}.route`);

  const onlyFor = (key: keyof IndexFileConfig, allowed: IndexConfig['role']) => {
    if (ix[key] !== undefined && role !== allowed) {
      throw new ConfigError(`${where}.${key}`, `only applies to a ${allowed} index, this one is ${role}`, `remove ${key}`);
    }
  };
  onlyFor('trusted_publisher', 'hosted');
  onlyFor('upstream_concurrency', 'cached');
  onlyFor('cache_ttl_secs', 'cached');
  onlyFor('upstream_deletions', 'cached');
  onlyFor('upstream_hosts', 'cached');
  for (const key of secretSpellings('upstream_username', 'upstream_password')) onlyFor(key, 'cached');
  onlyFor('upload_target', 'virtual');
  onlyFor('volatile', 'hosted');
  onlyFor('quota_bytes', 'hosted');
  onlyFor('max_bytes', 'cached');
  onlyFor('evict_unused_after', 'cached');
  for (const key of secretSpellings('upload_token')) onlyFor(key, 'hosted');
  const retention = retentionRules(ix, where, role, ecosystem, ecosystems);

  const base = {
    name: ix.name,
    route: routeSegments.join('/'),
    routeSegments,
    ecosystem: ecosystem.id,
    policy: {
      maxFileSize: ix.policy?.['max-file-size'],
      denyProjects: ix.policy?.['deny-projects'] ?? [],
      allowProjects: ix.policy?.['allow-projects'] ?? [],
      minReleaseAgeSecs: ix.policy?.['min-release-age'] === undefined ? undefined : (parseDuration(ix.policy['min-release-age']) ?? undefined),
    },
    webhooks: (ix.webhook ?? []).map((w, j) => resolveWebhook(w, `${where}.webhook[${j}]`, secrets)),
    tokens: resolveTokens(ix.token, where, role, secrets),
    serviceAccounts: resolveServiceAccounts(ix.service_account, where, role),
    private: ix.read === 'token',
  };
  switch (role) {
    case 'hosted':
      return {
        ...base,
        role,
        uploadToken: resolveSecret(ix, 'upload_token', where, secrets),
        trustedPublishers: resolvePublishers(ix.trusted_publisher, where),
        volatile: ix.volatile ?? false,
        ...(retention ? { retention } : {}),
        ...(ix.quota_bytes !== undefined ? { quotaBytes: sizeOf(ix.quota_bytes, `${where}.quota_bytes`) } : {}),
      };
    case 'cached':
      return {
        ...base,
        role,
        upstreams: resolveUpstreams(ix, where, secrets),
        upstreamConcurrency: ix.upstream_concurrency,
        cacheTtlSecs: ix.cache_ttl_secs ?? DEFAULT_CACHE_TTL_SECS,
        upstreamDeletions: ix.upstream_deletions ?? 'follow',
        ...cacheBudget(ix, where),
      };
    case 'virtual':
      return { ...base, role, members: ix.members!, uploadTarget: ix.upload_target };
  }
}

const RETENTION_KEYS = ['untagged_after', 'keep_tags'] as const;

/**
 * The retention rules of one index: only a hosted index of an ecosystem with tags takes them
 * (`EcosystemFacts.retention`); anywhere else they are refused by key, never ignored.
 */
function retentionRules(
  ix: IndexFileConfig,
  where: string,
  role: IndexConfig['role'],
  ecosystem: EcosystemFacts,
  ecosystems: readonly EcosystemFacts[],
): RetentionRules | undefined {
  const given = RETENTION_KEYS.find((k) => ix[k] !== undefined);
  if (given === undefined) return undefined;
  const takers = ecosystems.filter((e) => e.retention).map((e) => e.id);
  if (role !== 'hosted' || !ecosystem.retention) {
    throw new ConfigError(
      `${where}.${given}`,
      `retention applies only to a hosted ${takers.join(' or ')} index, this one is a ${role} ${ecosystem.id} index`,
      `remove ${given}`,
    );
  }
  const rules: RetentionRules = { keepTags: (ix.keep_tags ?? []).map((r) => ({ match: r.match, newest: r.newest })) };
  if (ix.untagged_after !== undefined) {
    const secs = parseDuration(ix.untagged_after);
    if (secs === null || secs === 0) {
      throw new ConfigError(`${where}.untagged_after`, 'must be a duration of at least 1s', 'use seconds or a duration like "30s", "12h", "14d"; longer than any push takes');
    }
    rules.untaggedAfterSecs = secs;
  }
  return rules;
}

/** A size key's bytes; the schema let only sizes through, so this refuses what rounds to nothing. */
function sizeOf(value: number | string, where: string): number {
  const bytes = parseSize(value);
  if (bytes === null) throw new ConfigError(where, 'must be a size above zero', 'use bytes or a size like "500MiB", "10Gi", "1.5GB"');
  return bytes;
}

/** `max_bytes` and `evict_unused_after` of a cached index, when either is set. */
function cacheBudget(ix: IndexFileConfig, where: string): { budget?: CacheBudget } {
  if (ix.max_bytes === undefined && ix.evict_unused_after === undefined) return {};
  const budget: CacheBudget = {};
  if (ix.max_bytes !== undefined) budget.maxBytes = sizeOf(ix.max_bytes, `${where}.max_bytes`);
  if (ix.evict_unused_after !== undefined) {
    const secs = parseDuration(ix.evict_unused_after);
    if (secs === null || secs === 0) throw new ConfigError(`${where}.evict_unused_after`, 'must be a duration of at least 1s', 'use seconds or a duration like "12h", "30d"');
    budget.evictUnusedAfterSecs = secs;
  }
  return { budget };
}

/** `[retention]`: `every`, at least a second apart. */
function retentionSchedule(r: FileConfig['retention']): RetentionSchedule {
  if (r?.every === undefined) return {};
  const secs = parseDuration(r.every);
  if (secs === null || secs === 0) throw new ConfigError('retention.every', 'must be a duration of at least 1s', 'use seconds or a duration like "1h", "1d"');
  return { everySecs: secs };
}

/** Cross-index rules: unique names and routes, members that exist, a writable upload target. */
function checkIndexes(indexes: IndexConfig[]): void {
  const byName = new Map<string, IndexConfig>();
  const byRoute = new Map<string, IndexConfig>();
  for (const ix of indexes) {
    if (byName.has(ix.name)) throw new ConfigError(`index "${ix.name}"`, 'the name is used twice', 'give every index its own name', ix.name);
    byName.set(ix.name, ix);
    const other = byRoute.get(ix.route);
    if (other) {
      throw new ConfigError(`index "${ix.name}".route`, `route "${ix.route}" is also the route of index "${other.name}"`, 'give every index its own route', ix.name);
    }
    byRoute.set(ix.route, ix);
  }
  for (const ix of indexes) {
    if (ix.role !== 'virtual') continue;
    const where = `index "${ix.name}"`;
    if (ix.members.length === 0) throw new ConfigError(`${where}.members`, 'is empty', 'list at least one member index name', ix.name);
    for (const m of ix.members) {
      const member = byName.get(m);
      if (!member) throw new ConfigError(`${where}.members`, `names "${m}", which is not a configured index`, `add an index named "${m}" or remove it from members`, ix.name);
      if (member === ix) throw new ConfigError(`${where}.members`, 'lists the index itself', 'remove it', ix.name);
      if (member.ecosystem !== ix.ecosystem) {
        throw new ConfigError(`${where}.members`, `"${m}" is a ${member.ecosystem} index, this one is ${ix.ecosystem}`, 'members must share the ecosystem', ix.name);
      }
      if (member.role === 'virtual') throw new ConfigError(`${where}.members`, `"${m}" is itself virtual`, 'list hosted and cached indexes only', ix.name);
    }
    if (ix.uploadTarget !== undefined) {
      if (!ix.members.includes(ix.uploadTarget)) {
        throw new ConfigError(`${where}.upload_target`, `"${ix.uploadTarget}" is not one of its members`, 'name a hosted member', ix.name);
      }
      if (byName.get(ix.uploadTarget)?.role !== 'hosted') {
        throw new ConfigError(`${where}.upload_target`, `"${ix.uploadTarget}" is not a hosted index`, 'name a hosted member', ix.name);
      }
    }
  }
}

/** A virtual index over a private member is private too: it serves the member's contents. */
function markPrivateViews(indexes: IndexConfig[]): void {
  const byName = new Map(indexes.map((ix) => [ix.name, ix]));
  for (const ix of indexes) if (ix.role === 'virtual' && ix.members.some((m) => byName.get(m)?.private)) ix.private = true;
}

/** Maps the first zod issue to a message that names the key and, inside `[[index]]`, the index. */
function zodToConfigError(error: z.ZodError, raw: unknown): ConfigError {
  const issue = error.issues[0];
  if (!issue) return new ConfigError('config', 'invalid');
  const path = issue.path.map(String);
  let where = path.length ? path.join('.') : '(top level)';
  let index: string | undefined;
  if (path[0] === 'index' && path[1] !== undefined) {
    const i = Number(path[1]);
    const name = (raw as { index?: Array<{ name?: unknown }> }).index?.[i]?.name;
    if (typeof name === 'string') index = name;
    const label = index !== undefined ? `index "${index}" (index[${i}])` : `index[${i}]`;
    where = [label, ...path.slice(2)].join('.');
  }
  if (issue.code === 'unrecognized_keys') {
    const keys = issue.keys.map((k) => `"${k}"`).join(', ');
    return new ConfigError(where, `unknown key ${keys}`, 'remove it or correct its spelling (docs/configuration.md lists every key)', index);
  }
  return new ConfigError(where, issue.message, undefined, index);
}
