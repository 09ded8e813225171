/**
 * The project source of a cached index: its upstream's Simple pages, read through the document
 * cache (`cache_ttl_secs` freshness, revalidation, stale copies while the upstream is down, an
 * `UpstreamError` when nothing is cached), parsed into our resolved model, with this index's own
 * overrides (yank, hide) on top. Files come through `CachedFiles`.
 */
import type { CachedIndex } from '../../../config/types.js';
import { HttpError } from '../../../http/errors.js';
import type { CounterSink } from '../../../observe/counters.js';
import { fetchDoc } from '../../../roles/fetch-doc.js';
import { DocCache, type DocResult } from '../../../roles/read-through.js';
import type { SharedFetches } from '../../../roles/flight-peers.js';
import { BlobFlights, type FlightOutcome } from '../../../roles/single-flight.js';
import { UpstreamClient } from '../../../roles/upstream.js';
import { UpstreamError } from '../../../roles/upstream-error.js';
import type { UpstreamSlots } from '../../../limits/upstream-slots.js';
import type { Holder } from '../../../storage/holds.js';
import { REQUEST_READ, type BlobStore, type MetaStore, type Versioned } from '../../../storage/types.js';
import type { CachedDoc } from '../../../roles/freshness.js';
import { candidateProjects } from '../source/lookup.js';
import { applyOverrides, withOverridesVersion, type LoadedOverrides, type ProjectOverrides } from '../../model/overrides.js';
import type { ResolvedProject } from '../../model/resolved.js';
import type { IndexSource, ListedFile, NameList, ProjectView, StartedReads } from '../source/types.js';
import { CachedFiles } from './files.js';
import { KnownSizes, withKnownSizes, withSizesVersion, type LoadedSizes } from './known-sizes.js';
import { pythonEgress } from './upstream-hosts.js';
import { toCachedProject, type CachedProject } from './to-resolved.js';
import { MAX_LIST_BYTES, parseUpstreamList } from './upstream-list.js';
import { parseUpstreamPage } from './upstream-page.js';

/** PEP 691: JSON preferred, HTML accepted (pypiserver and older mirrors only speak HTML). */
export const UPSTREAM_ACCEPT = 'application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1';

/** Parsed upstream pages kept in memory, by page digest (the bytes never change under a digest). */
const PARSED_PAGES = 256;

export interface CachedSourceOptions {
  index: CachedIndex;
  /** The index's upstream fetch cap (`upstream_concurrency`), shared with the metrics. */
  slots: UpstreamSlots;
  meta: MetaStore;
  blobs: BlobStore;
  /** The cached index's hold (`python.<index>`) on the blobs this source stores (pages, files, metadata). */
  holder: Holder;
  /** Local scratch (the data dir's, never the store's) for reading archives that are not being stored. */
  scratchDir: string;
  counters: CounterSink;
  overrides: ProjectOverrides;
  /** Told once per finished upstream file fetch (published, rejected, failed). */
  onFlight?: (outcome: FlightOutcome) => void;
  /** The server's other worker processes, with which pages and files are fetched once. */
  fetches?: SharedFetches;
  /** Told (not awaited) when what the index holds of a project changed: its page, or a file or metadata stored. */
  onProjectChanged?: (normalized: string) => void;
}

/** The stored record of a project's upstream page. */
function pageKey(indexName: string, normalized: string): string {
  return `python/${indexName}/cache/pages/${normalized}`;
}

/** What `project` reads from the store, started together. */
interface ProjectReads {
  record: Promise<Versioned<CachedDoc> | null>;
  overrides: Promise<LoadedOverrides | null>;
  wantsSizes: boolean;
  sizes: Promise<LoadedSizes | null>;
}

interface Loaded {
  doc: DocResult;
  normalized: string;
}

export class CachedSource implements IndexSource {
  readonly client: UpstreamClient;
  readonly slots: UpstreamSlots;
  readonly docs: DocCache;
  readonly files: CachedFiles;
  readonly sizes: KnownSizes;
  readonly #o: CachedSourceOptions;
  readonly #parsed = new Map<string, CachedProject>();
  #list: { digest: string; names: string[] } | null = null;
  /** Projects whose page, when last parsed here, left some file without a size: their sizes are read alongside. */
  readonly #unsized = new Set<string>();
  /** Reads started by `startReads`, until the request that started them is done with its token. */
  readonly #started = new WeakMap<StartedReads, ProjectReads>();

  constructor(opts: CachedSourceOptions) {
    this.#o = opts;
    const { index } = opts;
    this.slots = opts.slots;
    // Page links are resolved against the base, so it must end in a slash.
    const base = index.upstream.endsWith('/') ? index.upstream : `${index.upstream}/`;
    this.client = new UpstreamClient({
      baseUrl: base,
      ...(index.upstreamUsername ? { username: index.upstreamUsername } : {}),
      ...(index.upstreamPassword ? { password: index.upstreamPassword } : {}),
      slots: this.slots,
      egress: pythonEgress(index, base),
    });
    const fetches = opts.fetches;
    const pages = `${pageKey(index.name, '')}`;
    const changed = opts.onProjectChanged;
    this.docs = new DocCache({
      meta: opts.meta,
      blobs: opts.blobs,
      holder: opts.holder,
      ttlSecs: index.cacheTtlSecs,
      counters: opts.counters,
      ...(fetches ? { locks: fetches.locks } : {}),
      ...(changed ? { onChanged: (key: string) => key.startsWith(pages) && changed(key.slice(pages.length)) } : {}),
    });
    const flights = new BlobFlights({
      store: opts.blobs,
      holder: opts.holder,
      counters: opts.counters,
      ...(opts.onFlight ? { onOutcome: opts.onFlight } : {}),
      ...(fetches ? { peers: { flights: fetches.flights, scope: `python:${index.name}` } } : {}),
    });
    this.sizes = new KnownSizes(opts.meta, index.name);
    this.files = new CachedFiles({
      indexName: index.name,
      client: this.client,
      blobs: opts.blobs,
      meta: opts.meta,
      holder: opts.holder,
      flights,
      counters: opts.counters,
      tmpDir: opts.scratchDir,
      sizes: this.sizes,
      ...(changed ? { onStored: changed } : {}),
    });
  }

  get index(): CachedIndex {
    return this.#o.index;
  }

  /**
   * The stored page, this index's overrides and (when the page last read gave some file no size)
   * the learnt sizes are read together: a warm page is one round trip to the store. An override
   * document that does not exist is read like one that does, so one written by another process
   * is seen on the next request.
   */
  async project(normalized: string, started?: StartedReads): Promise<ProjectView | null> {
    const mine = started && started.normalized === normalized ? this.#started.get(started) : undefined;
    // Once: the reads belong to the request that started them.
    if (started) this.#started.delete(started);
    const reads = mine ?? this.#startReads(normalized);
    const [loaded, overrides, early] = await Promise.all([this.#load(normalized, reads.record), reads.overrides, reads.sizes]);
    if (!loaded) return null;
    const cached = await this.#parse(loaded);
    this.#noteUnsized(normalized, cached.unsized);
    const sizes = !cached.unsized ? null : reads.wantsSizes ? early : await this.#sizes(cached, normalized);
    return {
      version: withOverridesVersion(withSizesVersion(loaded.doc.record.digest, sizes), overrides),
      hosted: false,
      resolve: async () => applyOverrides(withKnownSizes(cached.resolved, sizes), overrides?.doc),
    };
  }

  startReads(normalized: string): StartedReads {
    const token: StartedReads = { normalized };
    const reads = this.#startReads(normalized);
    // Used by a later `project` of this request, or not at all (a private member shadowed it).
    for (const p of [reads.record, reads.overrides, reads.sizes]) p.catch(() => undefined);
    this.#started.set(token, reads);
    return token;
  }

  /** The store reads of `project`: the page record, the overrides, the learnt sizes if wanted. */
  #startReads(normalized: string): ProjectReads {
    const wantsSizes = this.#unsized.has(normalized);
    return {
      record: this.docs.peek(pageKey(this.index.name, normalized), REQUEST_READ),
      overrides: this.#o.overrides.get(this.index.name, normalized, REQUEST_READ),
      wantsSizes,
      sizes: wantsSizes ? this.sizes.get(normalized, REQUEST_READ) : Promise.resolve(null),
    };
  }

  /**
   * The project as this index holds it now (its stored page, with its overrides), never asking
   * the upstream; null when no page of it is stored. For the search index.
   */
  async storedProject(normalized: string): Promise<ResolvedProject | null> {
    const [doc, overrides] = await Promise.all([this.docs.stored(pageKey(this.index.name, normalized)), this.#o.overrides.get(this.index.name, normalized)]);
    if (!doc) return null;
    const cached = await this.#parse({ doc, normalized });
    return applyOverrides(cached.resolved, overrides?.doc);
  }

  /** Every project of which a page is stored (a listing: the search index's first build only). */
  async *storedNames(): AsyncGenerator<string> {
    const prefix = pageKey(this.index.name, '');
    for await (const key of this.#o.meta.list(prefix.slice(0, -1))) yield key.slice(prefix.length);
  }

  /** The project as the upstream serves it, before this index's overrides (for mutations). */
  async upstreamProject(normalized: string): Promise<ResolvedProject | null> {
    const loaded = await this.#load(normalized);
    return loaded ? (await this.#parse(loaded)).resolved : null;
  }

  async names(): Promise<NameList> {
    const doc = await this.docs.read(`python/${this.index.name}/cache/index`, (cond) =>
      fetchDoc(this.client, '', cond, { headers: { accept: UPSTREAM_ACCEPT }, maxBytes: MAX_LIST_BYTES }),
    );
    if (!doc) return { names: [], version: 'absent' };
    if (this.#list?.digest !== doc.record.digest) {
      this.#list = { digest: doc.record.digest, names: parseUpstreamList(await doc.body(), doc.record.contentType) };
    }
    return { names: this.#list.names, version: doc.record.digest };
  }

  async locate(sha256: string, filename: string): Promise<ListedFile | null> {
    for (const project of candidateProjects(filename)) {
      const loaded = await this.#load(project);
      if (!loaded) continue;
      const cached = await this.#parse(loaded);
      const up = cached.upstream.get(filename);
      if (!up) continue;
      const overrides = await this.#o.overrides.get(this.index.name, project);
      const sizes = await this.#sizes(cached, project);
      const file = applyOverrides(withKnownSizes(cached.resolved, sizes), overrides?.doc).files.find((f) => f.filename === filename);
      // Hidden through this index, or other bytes under that name.
      if (!file || file.sha256 !== sha256) return null;
      return { project, file, open: (part, opts) => this.files.open(up, file, part, project, opts) };
    }
    return null;
  }

  /** Sizes learnt for the files this page gives none for (none to read when it gives them all). */
  async #sizes(cached: CachedProject, normalized: string): Promise<LoadedSizes | null> {
    return cached.unsized ? this.sizes.get(normalized) : null;
  }

  close(): void {
    this.client.close();
  }

  #noteUnsized(normalized: string, unsized: boolean): void {
    this.#unsized.delete(normalized);
    if (!unsized) return;
    this.#unsized.add(normalized);
    if (this.#unsized.size > PARSED_PAGES) this.#unsized.delete(this.#unsized.values().next().value!);
  }

  #load(normalized: string, stored?: Promise<Versioned<CachedDoc> | null>): Promise<Loaded | null> {
    const key = pageKey(this.index.name, normalized);
    return this.docs
      .read(key, (cond) => fetchDoc(this.client, `${encodeURIComponent(normalized)}/`, cond, { headers: { accept: UPSTREAM_ACCEPT } }), stored)
      .then((doc) => (doc ? { doc, normalized } : null));
  }

  async #parse({ doc, normalized }: Loaded): Promise<CachedProject> {
    const digest = doc.record.digest;
    const hit = this.#parsed.get(digest);
    if (hit && hit.resolved.normalized === normalized) return hit;
    const pageUrl = new URL(`${encodeURIComponent(normalized)}/`, this.client.baseUrl).toString();
    let parsed: CachedProject;
    try {
      parsed = toCachedProject(parseUpstreamPage(await doc.body(), doc.record.contentType, pageUrl), normalized);
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new UpstreamError('malformed', null, `the upstream's page of ${normalized} cannot be read: ${err instanceof Error ? err.message : String(err)}`);
    }
    this.#parsed.delete(digest);
    this.#parsed.set(digest, parsed);
    while (this.#parsed.size > PARSED_PAGES) this.#parsed.delete(this.#parsed.keys().next().value!);
    return parsed;
  }
}
