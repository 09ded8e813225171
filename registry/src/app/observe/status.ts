/**
 * `GET /+status`: what the server is and has seen, for the operator and the web UI alike. Built
 * from the configuration, the ecosystems' descriptions and the per-index summary documents
 * (observe/summary.ts); no upstream fetch, no artifact bytes, no scan except the repair path below.
 *
 * `?details=admin` adds, per hosted index, its project and file counts, and the server's recent
 * uploads. They come from the summary documents; a hosted index whose summary was never rebuilt
 * by a scan (a store that predates summaries, or a new index) is scanned once, through its
 * ecosystem, and the result stored, so later requests and other replicas read it; concurrent
 * requests share that scan (summary-scans.ts). With `[admin] token` set, the admin details need
 * it (routes.ts).
 */
import { isExpired } from '../../access/tokens.js';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { CachedIndex, IndexConfig } from '../../config/types.js';
import type { IndexDescription } from '../../observe/describe.js';
import { displayUrl } from '../../config/sanitize.js';
import type { Ecosystem } from '../../ecosystem/ecosystem.js';
import { HttpError } from '../../http/errors.js';
import type { RateLimitSnapshot } from '../../limits/rate-limiter.js';
import type { RequestSnapshot } from '../../observe/requests.js';
import { secretInfo } from '../../observe/redact.js';
import { capRecent, type IndexSummaries, type IndexSummaryDoc, type RecentUpload } from '../../observe/summary.js';
import type { SummaryScans } from './summary-scans.js';
import type { LastCollection, UsageFigures, UsageLedger } from '../../lifecycle/usage/ledger.js';
import type { ScratchBudget } from '../../storage/scratch-budget.js';

/** The registry workspace's package.json version (read once; dist/app/observe/ is three levels down). */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface StatusSources {
  indexes: readonly IndexConfig[];
  /** Which storage backend this process uses (never its path, endpoint or keys). */
  storageBackend: string;
  /** Whether large downloads are redirected to the object store (`[storage] redirect`). */
  storageRedirect?: boolean;
  ecosystems: ReadonlyMap<string, Ecosystem>;
  summaries: IndexSummaries;
  /** The repair scans of `details=admin`: one per index at a time, one index at a time. */
  scans: SummaryScans;
  /** Every worker's requests, summed (server-counters.ts). */
  requests: RequestSnapshot;
  /** The rate limiter's decisions per class (zero while it is disabled), every worker's summed. */
  rateLimit: { enabled: boolean; counters: RateLimitSnapshot };
  /** Worker processes serving (1: one process). */
  workers: number;
  startedAt: Date;
  /** What each index and the store hold (lifecycle/usage/), and how the last collection ended. */
  usage: Pick<UsageLedger, 'usage' | 'total' | 'countedAt' | 'lastCollection'>;
  /** What this process's staged writes hold of its scratch budget (storage/scratch-budget.ts). */
  scratch: Pick<ScratchBudget, 'limitBytes' | 'used' | 'waiting' | 'refused'>;
  /** `[storage] peer_cache` in the process that answered (storage/peers/); null when off. */
  peerCache: { status(): { serving: boolean; members: number; removed: number } } | null;
}

export interface StatusQuery {
  details: boolean;
}

/**
 * The scratch budget of the process that answered (each worker has its share): its limit (null:
 * none), what staged writes hold now, declared lengths waiting for room, writes refused so far.
 */
function scratchFields(s: StatusSources['scratch']): Record<string, unknown> {
  return { limit_bytes: s.limitBytes ?? null, used_bytes: s.used, waiting: s.waiting, refused: s.refused };
}

/** `details` is the one parameter; its one value is `admin`. */
export function parseStatusQuery(query: URLSearchParams): StatusQuery {
  for (const key of query.keys()) {
    if (key !== 'details') throw new HttpError(400, `unknown parameter "${key}"; /+status takes only details=admin`);
  }
  const details = query.getAll('details');
  if (details.length > 1 || (details.length === 1 && details[0] !== 'admin')) {
    throw new HttpError(400, 'details takes one value: admin');
  }
  return { details: details.length === 1 };
}

/** Role-specific settings; every entry has every key (empty or null when not of its role), for machines. */
function roleFields(ix: IndexConfig, described: IndexDescription): Record<string, unknown> {
  return {
    members: ix.role === 'virtual' ? ix.members : [],
    upload_target: ix.role === 'virtual' ? (ix.uploadTarget ?? null) : null,
    volatile: ix.role === 'hosted' ? ix.volatile : false,
    quota_bytes: ix.role === 'hosted' ? (ix.quotaBytes ?? null) : null,
    retention:
      ix.role === 'hosted' && ix.retention
        ? { untagged_after_secs: ix.retention.untaggedAfterSecs ?? null, keep_tags: ix.retention.keepTags.map((r) => ({ match: r.match, newest: r.newest })) }
        : null,
    max_bytes: ix.role === 'cached' ? (ix.budget?.maxBytes ?? null) : null,
    evict_unused_after_secs: ix.role === 'cached' ? (ix.budget?.evictUnusedAfterSecs ?? null) : null,
    ...(ix.role === 'cached' ? upstreamFields(ix, described) : {}),
    ...(ix.role === 'hosted'
      ? {
          upload_token: secretInfo(ix.uploadToken),
          // Who may mint upload tokens, by the rules they must meet (none of it is a secret).
          trusted_publishers: ix.trustedPublishers.map((p) => ({
            name: p.name,
            issuer: p.issuer,
            claims: p.claims,
            ...(p.workflow ? { workflow: p.workflow } : {}),
            ...(p.ref ? { ref: p.ref } : {}),
            ...(p.projects ? { projects: p.projects } : {}),
          })),
        }
      : {}),
    // Reads need a credential of the index (access/readers.ts): its contents are shown to readers only.
    private: ix.private,
    // Named tokens by name: never a secret, nor a hint of one beyond where it is read from.
    tokens: ix.tokens.map((t) => ({
      name: t.name,
      scopes: t.scopes,
      ...(t.projects ? { projects: t.projects } : {}),
      ...(t.expiresAt ? { expires: t.expiresAt.toISOString(), expired: isExpired(t) } : {}),
      source: secretInfo(t.secret).source,
    })),
  };
}

/**
 * A cached index's upstreams: `upstream` sums them up (the first's URL, `offline` while every one
 * fails, `summary` "2/3 online"), `upstreams` has each one's health and pressure, in the order
 * they are asked, with where its credentials come from (never what they are).
 */
function upstreamFields(ix: CachedIndex, described: IndexDescription): Record<string, unknown> {
  const reports = described.upstreams ?? [];
  const online = reports.length === 0 ? ix.upstreams.length : reports.filter((r) => r.online).length;
  const first = ix.upstreams[0];
  return {
    upstream: {
      url: displayUrl(first.url),
      offline: described.upstreamOffline ?? false,
      online,
      total: ix.upstreams.length,
      summary: `${online}/${ix.upstreams.length} online`,
      cache_ttl_secs: ix.cacheTtlSecs,
      concurrency: ix.upstreamConcurrency ?? null,
      username: secretInfo(first.username),
      password: secretInfo(first.password),
    },
    upstreams: ix.upstreams.map((u, i) => ({
      ...(reports[i] ?? { url: displayUrl(u.url), state: 'online', online: true, retry_at: null, last_error: null, rate_limited_total: 0, rate_limit: null }),
      url: displayUrl(u.url),
      failover_on_404: u.failoverOn404,
      username: secretInfo(u.username),
      password: secretInfo(u.password),
    })),
  };
}

/** Kept copies listed by name in `/+status`, newest first; `count` has them all. */
export const KEPT_LISTED = 20;

/**
 * A cached index's `upstream_deletions` and what it keeps after upstream deletes (its summary's
 * `kept`): null on other roles.
 */
function keptFields(ix: IndexConfig, summary: IndexSummaryDoc | null): Record<string, unknown> {
  if (ix.role !== 'cached') return { upstream_deletions: null, kept_after_upstream_delete: null };
  const kept = Object.entries(summary?.kept ?? {}).sort((a, b) => b[1] - a[1]);
  return {
    upstream_deletions: ix.upstreamDeletions,
    kept_after_upstream_delete: {
      count: kept.length,
      newest: kept.slice(0, KEPT_LISTED).map(([name, since]) => ({ name, since: new Date(since).toISOString() })),
    },
  };
}

function describeIndex(ix: IndexConfig, eco: Ecosystem | undefined, summary: IndexSummaryDoc | null, stored: UsageFigures): Record<string, unknown> {
  const extra = eco?.describe?.(ix) ?? {};
  return {
    name: ix.name,
    route: ix.route,
    ecosystem: ix.ecosystem,
    role: ix.role,
    ...roleFields(ix, extra),
    ...keptFields(ix, summary),
    serial: summary?.serial ?? 0,
    // A virtual index holds nothing of its own: its members do.
    stored: ix.role === 'virtual' ? null : stored,
    policy: {
      max_file_size: ix.policy.maxFileSize ?? null,
      deny_projects: ix.policy.denyProjects,
      allow_projects: ix.policy.allowProjects,
      min_release_age_secs: ix.policy.minReleaseAgeSecs ?? null,
    },
    webhooks: ix.webhooks.map((w) => ({
      url: displayUrl(w.url),
      events: w.events ?? null,
      secret: secretInfo(w.secret),
      basic_auth: secretInfo(w.basicAuth),
    })),
    ...(extra.terms ? { terms: extra.terms } : {}),
    ...(extra.fields ? { ecosystem_details: extra.fields } : {}),
  };
}

function lastRun(last: LastCollection | undefined): Record<string, unknown> | null {
  if (!last) return null;
  return {
    ended_at: last.endedAt,
    result: last.result,
    blobs_deleted: last.blobsDeleted,
    bytes_deleted: last.bytesDeleted,
    ...(last.error !== undefined ? { error: last.error } : {}),
  };
}

/** The summary of a hosted index for the admin details, scanned and stored once if never scanned. */
async function adminSummary(src: StatusSources, ix: IndexConfig, summary: IndexSummaryDoc | null): Promise<{ doc: IndexSummaryDoc | null; scanned: boolean }> {
  if (summary?.scannedAt !== undefined) return { doc: summary, scanned: false };
  const scan = src.ecosystems.get(ix.ecosystem)?.scanIndex;
  if (!scan) return { doc: summary, scanned: false };
  return src.scans.ensure(ix.name, () => scan(ix));
}

export async function buildStatus(src: StatusSources, query: StatusQuery, now = new Date()): Promise<Record<string, unknown>> {
  const summaries = await Promise.all(src.indexes.map((ix) => src.summaries.read(ix.name)));
  const indexes: Record<string, unknown>[] = [];
  const recent: RecentUpload[] = [];
  for (const [i, ix] of src.indexes.entries()) {
    const entry = describeIndex(ix, src.ecosystems.get(ix.ecosystem), summaries[i] ?? null, src.usage.usage(ix.name));
    if (query.details && ix.role === 'hosted') {
      const { doc, scanned } = await adminSummary(src, ix, summaries[i] ?? null);
      const counts = Object.values(await src.summaries.projects(ix.name, doc));
      entry.details = {
        projects: counts.length,
        files: counts.reduce((a, b) => a + b, 0),
        source: scanned ? 'scan' : 'summary',
        scanned_at: doc?.scannedAt ?? null,
      };
      recent.push(...(doc?.recent ?? []));
    }
    indexes.push(entry);
  }
  return {
    version: VERSION,
    // Which replica answered: in Kubernetes the pod name.
    instance: hostname(),
    storage: {
      backend: src.storageBackend,
      ...(src.storageRedirect ? { redirect: true } : {}),
      scratch: scratchFields(src.scratch),
      ...(src.peerCache ? { peer_cache: src.peerCache.status() } : {}),
    },
    serial: summaries.reduce((sum, s) => sum + (s?.serial ?? 0), 0),
    started_at: src.startedAt.toISOString(),
    uptime_secs: Math.max(0, Math.floor((now.getTime() - src.startedAt.getTime()) / 1000)),
    workers: src.workers,
    requests: src.requests,
    rate_limit: { enabled: src.rateLimit.enabled, ...src.rateLimit.counters },
    // The store in all: a blob several indexes hold counts once here.
    stored: { ...src.usage.total(), counted_at: src.usage.countedAt },
    gc: { last_run: lastRun(src.usage.lastCollection) },
    indexes,
    ...(query.details ? { recent_uploads: capRecent(recent) } : {}),
  };
}
