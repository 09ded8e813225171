/**
 * The project source of a cached index: its upstream's Simple pages, read through the document
 * cache (`cache_ttl_secs` freshness, revalidation, stale copies while the upstream is down, an
 * `UpstreamError` when nothing is cached), parsed into our resolved model, with this index's own
 * overrides (yank, hide) on top. Files come through `CachedFiles`.
 *
 * With several upstreams (roles/upstream-list.ts), a page is asked of them in order; the stored
 * record names the one that answered (`CachedDoc.upstream`), whose validators it keeps, against
 * whose URL its links resolve, and whose client fetches its files first. A file that upstream
 * cannot send now is looked up on the others' pages by filename and sha256: the bytes are
 * verified against the digest the first page gave, whoever sends them. The project list is the
 * first answering upstream's.
 *
 * With `upstream_deletions = "keep"`, a page the upstreams answer 404/410 for is served on from
 * the store (roles/read-through.ts), with its files as stored; a page that still exists replaces
 * the stored one as always, so a file the upstream removed from it is no longer listed.
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
import { UpstreamList, type UpstreamMember } from '../../../roles/upstream-list.js';
import type { FetchedDoc, Conditional } from '../../../roles/fetch-doc.js';
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
  /**
   * Told (not awaited) when a project's page, gone upstream, is kept (`upstream_deletions =
   * "keep"`: since when, once per mark), and when the mark goes (null).
   */
  onProjectKept?: (normalized: string, since: number | null) => void;
}

/** The stored record of a project's upstream page. */
function pageKey(indexName: string, normalized: string): string {
  return `python/${indexName}/cache/pages/${normalized}`;
}

/** What `project` reads from the store, started together. */
interface ProjectReads {
  record: Promise<Versioned<CachedDoc> | null>;
  /** When (`Date.now()`) the read of `record` began. */
  recordAt: number;
  overrides: Promise<LoadedOverrides | null>;
  wantsSizes: boolean;
  sizes: Promise<LoadedSizes | null>;
}

interface Loaded {
  doc: DocResult;
  normalized: string;
}

/** A parsed page, and the upstream it came from. */
interface Parsed {
  cached: CachedProject;
  from: UpstreamMember<UpstreamClient>;
}

export class CachedSource implements IndexSource {
  /** The index's upstreams, in the order a miss asks them, each with its own client and health. */
  readonly upstreams: UpstreamList<UpstreamClient>;
  readonly slots: UpstreamSlots;
  readonly docs: DocCache;
  readonly files: CachedFiles;
  readonly sizes: KnownSizes;
  readonly #o: CachedSourceOptions;
  readonly #parsed = new Map<string, Parsed>();
  #list: { digest: string; names: string[] } | null = null;
  /** Projects whose page, when last parsed here, left some file without a size: their sizes are read alongside. */
  readonly #unsized = new Set<string>();
  /** Reads started by `startReads`, until the request that started them is done with its token. */
  readonly #started = new WeakMap<StartedReads, ProjectReads>();

  constructor(opts: CachedSourceOptions) {
    this.#o = opts;
    const { index } = opts;
    this.slots = opts.slots;
    this.upstreams = new UpstreamList(index.upstreams, (upstream, health) => {
      // Page links are resolved against the base, so it must end in a slash.
      const base = upstream.url.endsWith('/') ? upstream.url : `${upstream.url}/`;
      return new UpstreamClient({
        baseUrl: base,
        ...(upstream.username ? { username: upstream.username } : {}),
        ...(upstream.password ? { password: upstream.password } : {}),
        slots: this.slots,
        egress: pythonEgress(upstream, base),
        ...(upstream.timeoutSecs !== undefined ? { headersTimeoutMs: upstream.timeoutSecs * 1000 } : {}),
        onAnswer: (status, headers) => health.observe(status, headers, Date.now()),
      });
    });
    const fetches = opts.fetches;
    const pages = `${pageKey(index.name, '')}`;
    const changed = opts.onProjectChanged;
    const kept = opts.onProjectKept;
    this.docs = new DocCache({
      meta: opts.meta,
      blobs: opts.blobs,
      holder: opts.holder,
      ttlSecs: index.cacheTtlSecs,
      counters: opts.counters,
      health: this.upstreams,
      ...(fetches ? { locks: fetches.locks } : {}),
      ...(changed ? { onChanged: (key: string) => key.startsWith(pages) && changed(key.slice(pages.length)) } : {}),
      // A project's page is the unit kept: a file dropped from a page that still exists goes with it.
      deletions: index.upstreamDeletions,
      ...(kept ? { onKept: (key: string, since: number | null) => key.startsWith(pages) && kept(key.slice(pages.length), since) } : {}),
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
      upstreams: this.upstreams,
      elsewhere: (member, project, filename, sha256) => this.#fileOn(member, project, filename, sha256),
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
    const [loaded, overrides, early] = await Promise.all([this.#load(normalized, reads.record, reads.recordAt), reads.overrides, reads.sizes]);
    if (!loaded) return null;
    const { cached } = await this.#parse(loaded);
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
      recordAt: Date.now(),
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
    const { cached } = await this.#parse({ doc, normalized });
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
    return loaded ? (await this.#parse(loaded)).cached.resolved : null;
  }

  async names(): Promise<NameList> {
    const doc = await this.docs.read(`python/${this.index.name}/cache/index`, (cond) => this.#fetch('', cond, MAX_LIST_BYTES));
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
      const { cached, from } = await this.#parse(loaded);
      const up = cached.upstream.get(filename);
      if (!up) continue;
      const overrides = await this.#o.overrides.get(this.index.name, project);
      const sizes = await this.#sizes(cached, project);
      const file = applyOverrides(withKnownSizes(cached.resolved, sizes), overrides?.doc).files.find((f) => f.filename === filename);
      // Hidden through this index, or other bytes under that name.
      if (!file || file.sha256 !== sha256) return null;
      return { project, file, open: (part, opts) => this.files.open({ up, file, project, from }, part, opts) };
    }
    return null;
  }

  /** Sizes learnt for the files this page gives none for (none to read when it gives them all). */
  async #sizes(cached: CachedProject, normalized: string): Promise<LoadedSizes | null> {
    return cached.unsized ? this.sizes.get(normalized) : null;
  }

  close(): void {
    for (const m of this.upstreams.members) m.client.close();
  }

  #noteUnsized(normalized: string, unsized: boolean): void {
    this.#unsized.delete(normalized);
    if (!unsized) return;
    this.#unsized.add(normalized);
    if (this.#unsized.size > PARSED_PAGES) this.#unsized.delete(this.#unsized.values().next().value!);
  }

  #load(normalized: string, stored?: Promise<Versioned<CachedDoc> | null>, storedAt?: number): Promise<Loaded | null> {
    const key = pageKey(this.index.name, normalized);
    return this.docs
      .read(key, (cond) => this.#fetch(`${encodeURIComponent(normalized)}/`, cond), stored, storedAt)
      .then((doc) => (doc ? { doc, normalized } : null));
  }

  /**
   * One document asked of the upstreams in order (a 404 passes on where `failover_on_404` says);
   * the validators go only to the upstream the stored copy came from.
   */
  async #fetch(path: string, cond: Conditional, maxBytes?: number): Promise<FetchedDoc> {
    const owner = this.#member(cond.upstream);
    const asked = await this.upstreams.ask(
      async (m) => {
        const mine: Conditional = m === owner ? cond : {};
        const doc = await fetchDoc(m.client, path, mine, { headers: { accept: UPSTREAM_ACCEPT }, ...(maxBytes !== undefined ? { maxBytes } : {}) });
        return doc.status === 'ok' ? { ...doc, upstream: m.url } : doc;
      },
      { absent: (doc) => doc.status === 'absent' },
    );
    return asked.value;
  }

  /** The upstream a stored record names; the first when it names none (or one no longer configured). */
  #member(url: string | undefined): UpstreamMember<UpstreamClient> {
    return this.upstreams.members.find((m) => m.url === url) ?? this.upstreams.members[0];
  }

  async #parse({ doc, normalized }: Loaded): Promise<Parsed> {
    const from = this.#member(doc.record.upstream);
    const key = `${doc.record.digest} ${from.position}`;
    const hit = this.#parsed.get(key);
    if (hit && hit.cached.resolved.normalized === normalized) return hit;
    const parsed: Parsed = { cached: this.#parseBody(await doc.body(), doc.record.contentType, normalized, from), from };
    this.#parsed.delete(key);
    this.#parsed.set(key, parsed);
    while (this.#parsed.size > PARSED_PAGES) this.#parsed.delete(this.#parsed.keys().next().value!);
    return parsed;
  }

  #parseBody(body: Buffer, contentType: string | undefined, normalized: string, from: UpstreamMember<UpstreamClient>): CachedProject {
    const pageUrl = new URL(`${encodeURIComponent(normalized)}/`, from.client.baseUrl).toString();
    try {
      return toCachedProject(parseUpstreamPage(body, contentType, pageUrl), normalized);
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new UpstreamError('malformed', null, `the upstream's page of ${normalized} cannot be read: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /**
   * Where `member` keeps the file `filename` with this sha256: from its page of the project, read
   * now and not stored (a failover for one file). `gone` when it lists no such file.
   */
  async #fileOn(member: UpstreamMember<UpstreamClient>, project: string, filename: string, sha256: string): Promise<string> {
    const doc = await fetchDoc(member.client, `${encodeURIComponent(project)}/`, {}, { headers: { accept: UPSTREAM_ACCEPT } });
    const up = doc.status === 'ok' ? this.#parseBody(doc.body, doc.headers.contentType, project, member).upstream.get(filename) : undefined;
    if (up?.sha256 !== sha256) throw new UpstreamError('gone', null, `the upstream ${member.url} does not list ${filename} with that sha256`, { status: 404 });
    return up.url;
  }
}
