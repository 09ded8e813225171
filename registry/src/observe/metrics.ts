/**
 * `GET /metrics`: the spec's counters in Prometheus text exposition, through prom-client.
 *
 * The per-index counters are not counted twice: the request path adds to the usage counters of
 * `/+stats` (plain additions on a preallocated record) and each scrape copies their current
 * values into the exposition. Only the request counter and the request-duration histogram are
 * touched per request. Node's default process metrics come along under the same prefix.
 */
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { IndexConfig } from '../config/types.js';
import type { UsageCounter, UsageCounters } from './counters.js';
import type { UpstreamReport } from './describe.js';
import type { WorkerPeers } from './peers.js';

const TOPIC = 'metrics';

export const METRICS_PREFIX = 'velodex_';

/** Each usage counter's metric, and which indexes carry it (the spec's "scope" column). */
const INDEX_METRICS: ReadonlyArray<{ counter: UsageCounter; name: string; help: string; scope: Scope }> = [
  { counter: 'pages', name: 'index_pages_total', help: 'Pages served (Simple pages, manifests, tag lists).', scope: 'all' },
  { counter: 'downloads', name: 'index_downloads_total', help: 'File and blob downloads.', scope: 'all' },
  { counter: 'bytes', name: 'index_download_bytes_total', help: 'Bytes of files and blobs served.', scope: 'all' },
  { counter: 'rejected', name: 'index_rejected_total', help: 'Downloads whose bytes failed digest verification and were not cached.', scope: 'all' },
  { counter: 'refreshes', name: 'index_refreshes_total', help: 'Upstream revalidations.', scope: 'caching' },
  { counter: 'changed', name: 'index_pages_changed_total', help: 'Revalidations that found new upstream content.', scope: 'caching' },
  { counter: 'stale_served', name: 'index_stale_served_total', help: 'Pages served from cache while the upstream was down.', scope: 'caching' },
  { counter: 'upstream_errors', name: 'index_upstream_errors_total', help: 'Upstream failures with nothing cached.', scope: 'caching' },
  { counter: 'uploads', name: 'index_uploads_total', help: 'Accepted uploads.', scope: 'writable' },
  { counter: 'quota_refused', name: 'index_quota_refused_total', help: 'Uploads refused because they would cross the index quota (quota_bytes).', scope: 'writable' },
  { counter: 'evicted', name: 'index_evicted_total', help: 'Files and blobs evicted from the cache to keep it within its budget.', scope: 'caching' },
  { counter: 'evicted_bytes', name: 'index_evicted_bytes_total', help: 'Bytes of the files and blobs evicted from the cache.', scope: 'caching' },
  {
    counter: 'kept_after_upstream_delete',
    name: 'index_kept_after_upstream_delete_total',
    help: 'Pages and tags the upstream deleted that the cache kept serving (upstream_deletions = "keep"), each counted once.',
    scope: 'caching',
  },
  { counter: 'metadata', name: 'index_metadata_total', help: 'Core-metadata sibling hits (PEP 658/714).', scope: 'metadata' },
];

/**
 * Which indexes a metric applies to. `caching`: cached indexes and virtual ones with a cached
 * member; `writable`: hosted indexes and virtual ones with an upload target; `metadata`: indexes
 * of an ecosystem that serves metadata siblings.
 */
type Scope = 'all' | 'caching' | 'writable' | 'metadata';

const LABELS = ['index', 'ecosystem', 'role'] as const;

/** What the exposition reads at scrape time, besides the usage counters. */
export interface MetricSources {
  indexes: readonly IndexConfig[];
  counters: UsageCounters;
  /** The index's upstream fetch cap, for the indexes that fetch from an upstream. */
  upstreamSlots(index: IndexConfig): { inflight: number; denied: number } | undefined;
  /** Each upstream's health and pressure, for a cached index (its ecosystem's `describe`). */
  upstreams?(index: IndexConfig): readonly UpstreamReport[] | undefined;
  /** Whether the index's ecosystem serves metadata siblings (the `metadata` counter). */
  servesMetadata(index: IndexConfig): boolean;
  /** The rate limiter's decisions so far, per class. */
  rateLimit(): { allowed: Record<string, number>; denied: Record<string, number> };
  /** What retention runs of this process removed from the index; undefined for an index without rules. */
  retention?(index: IndexConfig): { deleted: number; untagged: number } | undefined;
  /** What this process's garbage collections reclaimed (lifecycle/totals.ts). */
  collections?(): CollectionCounts;
  /** This process's scratch budget (storage/scratch-budget.ts): its limit (undefined: none), what staged writes hold, writes refused. */
  scratch?(): { limitBytes: number | undefined; used: number; refused: number };
  /** What an index holds (lifecycle/usage/); undefined for one that holds nothing of its own (virtual). */
  stored?(index: IndexConfig): { bytes: number; objects: number } | undefined;
  /** What the store holds in all (a blob several indexes hold counts once). */
  storedTotal?(): { bytes: number; objects: number };
}

/** The garbage collections of one process, as the metrics read them. */
export interface CollectionCounts {
  runs: number;
  holdsReleased: number;
  blobsDeleted: number;
  bytesDeleted: number;
  /** Epoch ms of the last run's end; 0 before any. */
  lastRunMs: number;
}

/**
 * Per upstream of each cached index (label `upstream`: its URL as `displayUrl` shows it, never a
 * credential): whether it is asked, and the pull-limit figures it last sent. With several worker
 * processes each has its own view of an upstream: `online` is the least of them (an upstream one
 * worker backs off from shows 0), `remaining` the least, `limit` the greatest.
 */
const UPSTREAM_GAUGES: ReadonlyArray<{ name: string; help: string; aggregator: 'min' | 'max'; value: (r: UpstreamReport) => number | null }> = [
  { name: 'upstream_online', help: 'Whether the upstream is asked (1), or backing off after a failure or a 429 (0).', aggregator: 'min', value: (r) => (r.online ? 1 : 0) },
  { name: 'upstream_ratelimit_limit', help: "The upstream's last ratelimit-limit figure (Docker Hub: pulls per window).", aggregator: 'max', value: (r) => r.rate_limit?.limit ?? null },
  { name: 'upstream_ratelimit_remaining', help: "The upstream's last ratelimit-remaining figure (Docker Hub: pulls left in the window).", aggregator: 'min', value: (r) => r.rate_limit?.remaining ?? null },
  { name: 'upstream_ratelimit_window_seconds', help: 'The window the ratelimit figures apply to (the w= of the header).', aggregator: 'max', value: (r) => r.rate_limit?.window_secs ?? null },
];

export class Metrics {
  readonly registry = new Registry();
  readonly #requests: Counter;
  readonly #duration: Histogram<'method' | 'status'>;
  readonly #durationBy = new Map<string, Histogram.Internal<'method' | 'status'>>();

  constructor(
    sources: MetricSources,
    /** The other workers of this server, whose registries a scrape merges (one process: itself alone). */
    private readonly peers: WorkerPeers,
  ) {
    peers.provide(TOPIC, () => this.registry.getMetricsAsJSON());
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: METRICS_PREFIX });
    // Three of prom-client's defaults are gauges named `_total`, which promtool (and Prometheus's
    // naming rules) refuse: counts of live handles, requests and resources, not totals.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      this.registry.removeSingleMetric(`${METRICS_PREFIX}${name}`);
    }
    this.#requests = new Counter({ name: `${METRICS_PREFIX}requests_total`, help: 'HTTP requests served.', registers });
    this.#duration = new Histogram({
      name: `${METRICS_PREFIX}http_request_duration_seconds`,
      help: 'Time from a request arriving to its response being written, by method and status class.',
      labelNames: ['method', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });

    const labelsOf = (ix: IndexConfig) => ({ index: ix.route, ecosystem: ix.ecosystem, role: ix.role });
    const byName = new Map(sources.indexes.map((ix) => [ix.name, ix]));
    const inScope = (ix: IndexConfig, scope: Scope): boolean => {
      const members = ix.role === 'virtual' ? ix.members.map((m) => byName.get(m)) : [];
      switch (scope) {
        case 'all':
          return true;
        case 'caching':
          return ix.role === 'cached' || members.some((m) => m?.role === 'cached');
        case 'writable':
          return ix.role === 'hosted' || (ix.role === 'virtual' && ix.uploadTarget !== undefined);
        case 'metadata':
          return sources.servesMetadata(ix);
      }
    };

    for (const m of INDEX_METRICS) {
      const indexes = sources.indexes.filter((ix) => inScope(ix, m.scope));
      new Counter({
        name: `${METRICS_PREFIX}${m.name}`,
        help: m.help,
        labelNames: LABELS,
        registers,
        collect() {
          this.reset();
          for (const ix of indexes) this.inc(labelsOf(ix), sources.counters.index(ix.route).get(m.counter));
        },
      });
    }

    const fetching = sources.indexes.filter((ix) => sources.upstreamSlots(ix) !== undefined);
    new Counter({
      name: `${METRICS_PREFIX}upstream_rate_limit_denied_total`,
      help: 'Requests denied with 429 because the upstream concurrency cap freed no slot in time.',
      labelNames: LABELS,
      registers,
      collect() {
        this.reset();
        for (const ix of fetching) this.inc(labelsOf(ix), sources.upstreamSlots(ix)?.denied ?? 0);
      },
    });
    new Gauge({
      name: `${METRICS_PREFIX}upstream_inflight_fetches`,
      help: 'Upstream fetches currently holding a slot.',
      labelNames: LABELS,
      registers,
      collect() {
        for (const ix of fetching) this.set(labelsOf(ix), sources.upstreamSlots(ix)?.inflight ?? 0);
      },
    });

    this.#upstreamMetrics(sources, labelsOf, registers);

    const retained = sources.indexes.filter((ix) => sources.retention?.(ix) !== undefined);
    for (const [field, name, help] of [
      ['deleted', 'index_retention_deleted_total', 'Untagged items (manifests) deleted by retention runs (untagged_after).'],
      ['untagged', 'index_retention_untagged_total', 'Tags removed by retention runs (keep_tags).'],
    ] as const) {
      new Counter({
        name: `${METRICS_PREFIX}${name}`,
        help,
        labelNames: LABELS,
        registers,
        collect() {
          this.reset();
          for (const ix of retained) this.inc(labelsOf(ix), sources.retention?.(ix)?.[field] ?? 0);
        },
      });
    }

    for (const [decision, help] of [
      ['allowed', 'Requests the rate limiter let through, by class.'],
      ['denied', 'Requests the rate limiter denied with 429, by class.'],
    ] as const) {
      new Counter({
        name: `${METRICS_PREFIX}rate_limit_${decision}_total`,
        help,
        labelNames: ['class'],
        registers,
        collect() {
          this.reset();
          for (const [cls, n] of Object.entries(sources.rateLimit()[decision])) this.inc({ class: cls }, n);
        },
      });
    }

    const stored = sources.stored;
    if (stored) {
      const holding = sources.indexes.filter((ix) => stored(ix) !== undefined);
      for (const [field, name, help] of [
        ['bytes', 'index_stored_bytes', 'Bytes of the blobs the index holds (a blob several indexes hold counts for each).'],
        ['objects', 'index_stored_objects', 'Blobs the index holds.'],
      ] as const) {
        new Gauge({
          name: `${METRICS_PREFIX}${name}`,
          help,
          labelNames: LABELS,
          registers,
          // Every worker reads the same shared figures: not added up.
          aggregator: 'max',
          collect() {
            for (const ix of holding) this.set(labelsOf(ix), stored(ix)?.[field] ?? 0);
          },
        });
      }
      const limited = sources.indexes.flatMap((ix) => {
        const limit = ix.role === 'hosted' ? ix.quotaBytes : ix.role === 'cached' ? ix.budget?.maxBytes : undefined;
        return limit === undefined ? [] : [{ ix, limit }];
      });
      new Gauge({
        name: `${METRICS_PREFIX}index_limit_bytes`,
        help: 'The bytes an index may hold: quota_bytes of a hosted index, max_bytes of a cached one.',
        labelNames: LABELS,
        registers,
        aggregator: 'max',
        collect() {
          for (const { ix, limit } of limited) this.set(labelsOf(ix), limit);
        },
      });
    }
    const storedTotal = sources.storedTotal;
    if (storedTotal) {
      for (const [field, name, help] of [
        ['bytes', 'stored_bytes', 'Bytes of every blob some index holds (each counted once).'],
        ['objects', 'stored_objects', 'Blobs some index holds.'],
      ] as const) {
        new Gauge({
          name: `${METRICS_PREFIX}${name}`,
          help,
          registers,
          aggregator: 'max',
          collect() {
            this.set(storedTotal()[field]);
          },
        });
      }
    }

    const collections = sources.collections;
    if (collections) {
      for (const [field, name, help] of [
        ['runs', 'gc_runs_total', 'Garbage collections this process ran (dry runs not counted).'],
        ['holdsReleased', 'gc_released_holds_total', 'Holds the garbage collector released.'],
        ['blobsDeleted', 'gc_reclaimed_blobs_total', 'Blobs the garbage collector deleted.'],
        ['bytesDeleted', 'gc_reclaimed_bytes_total', 'Bytes of the blobs the garbage collector deleted.'],
      ] as const) {
        new Counter({
          name: `${METRICS_PREFIX}${name}`,
          help,
          registers,
          collect() {
            this.reset();
            this.inc(collections()[field]);
          },
        });
      }
      new Gauge({
        name: `${METRICS_PREFIX}gc_last_run_timestamp_seconds`,
        help: 'When the last garbage collection of this server ended (0: none since start).',
        registers,
        // Workers' values are not added up: the latest run of any worker is the server's.
        aggregator: 'max',
        collect() {
          this.set(collections().lastRunMs / 1000);
        },
      });
    }

    // Each worker's share and holdings: summed over the workers, the server's.
    const scratch = sources.scratch;
    if (scratch) {
      new Gauge({
        name: `${METRICS_PREFIX}scratch_used_bytes`,
        help: 'Bytes that staged uploads and pull-through fills hold on local disk ([storage] scratch_limit counts them).',
        registers,
        collect() {
          this.set(scratch().used);
        },
      });
      new Gauge({
        name: `${METRICS_PREFIX}scratch_limit_bytes`,
        help: 'The scratch limit ([storage] scratch_limit); 0 when there is none.',
        registers,
        collect() {
          this.set(scratch().limitBytes ?? 0);
        },
      });
      new Counter({
        name: `${METRICS_PREFIX}scratch_refused_total`,
        help: 'Uploads and fills refused (413, or 503 for now) because they would pass the scratch limit.',
        registers,
        collect() {
          this.reset();
          this.inc(scratch().refused);
        },
      });
    }
  }

  #upstreamMetrics(sources: MetricSources, labelsOf: (ix: IndexConfig) => Record<string, string>, registers: Registry[]): void {
    const read = sources.upstreams;
    if (!read) return;
    const cached = sources.indexes.filter((ix) => ix.role === 'cached');
    const each = (visit: (labels: Record<string, string>, r: UpstreamReport) => void) => {
      for (const ix of cached) for (const r of read(ix) ?? []) visit({ ...labelsOf(ix), upstream: r.url }, r);
    };
    const labelNames = [...LABELS, 'upstream'];
    for (const g of UPSTREAM_GAUGES) {
      new Gauge({
        name: `${METRICS_PREFIX}${g.name}`,
        help: g.help,
        labelNames,
        registers,
        aggregator: g.aggregator,
        collect() {
          this.reset();
          each((labels, r) => {
            const v = g.value(r);
            if (v !== null) this.set(labels, v);
          });
        },
      });
    }
    new Counter({
      name: `${METRICS_PREFIX}upstream_rate_limited_total`,
      help: 'Answers 429 (too many requests) from the upstream.',
      labelNames,
      registers,
      collect() {
        this.reset();
        each((labels, r) => this.inc(labels, r.rate_limited_total));
      },
    });
  }

  /**
   * Counts one finished request. The histogram's child per (method, status class) is looked up
   * once and kept: prom-client hashes a label object on every `observe(labels, v)`.
   */
  observeRequest(method: string, status: number, seconds: number): void {
    this.#requests.inc();
    const key = `${method} ${Math.floor(status / 100)}`;
    let child = this.#durationBy.get(key);
    if (!child) {
      child = this.#duration.labels(method, `${Math.floor(status / 100)}xx`);
      // Methods come from clients: bound the map (a client inventing methods gets the slow path).
      if (this.#durationBy.size < 64) this.#durationBy.set(key, child);
    }
    child.observe(seconds);
  }

  /**
   * The exposition of the whole server: with several workers, every worker's metrics summed by
   * prom-client's cluster aggregation (counters and histograms add up; its default process
   * metrics say how each aggregates), so a scrape that reaches any worker sees one server.
   */
  async exposition(): Promise<string> {
    if (this.peers.workers === 1) return this.registry.metrics();
    const parts = await this.peers.gather<object[]>(TOPIC);
    return AggregatorRegistry.aggregate(parts).metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
