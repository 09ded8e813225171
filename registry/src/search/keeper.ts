/**
 * Keeps this process's search index (search-index.ts) current with the store, on every replica,
 * without a request ever listing the store:
 *
 * 1. At start the index is built in the background, index by index: the change log of the
 *    index (changes.ts) is read first (its `serial` S), then the ecosystem's keys and an entry per key. Serving
 *    never waits; until every index is built, results say `complete: false`. The refresh below
 *    leaves an index to this first build until the build has tried it; it builds only those whose
 *    first build failed.
 * 2. Every `refreshSecs` each built index's change log is read (one small read per index: a stat
 *    or a 304 when nothing changed). When its `serial` moved past the one seen, the names whose
 *    `changed` serial is above it are read again (put, or removed when gone). A write on any
 *    process is therefore found by a search on any other within `refreshSecs` plus the time to
 *    append it and read those entries: the freshness bound.
 * 3. A write through this process is applied at once: the change log tells its listeners and the
 *    names are read again right away, beside the writer's answer (not before it: an upload does
 *    not wait for the search index).
 *
 * When the log has forgotten names changed since the serial a process saw (`floor` above it: more
 * names changed meanwhile than the log keeps, the process fell behind its window), the process
 * reads that whole index again, as at start (cheap in CPU: entries that did not change are left
 * as they are).
 *
 * Since the log is read before the keys, a write that lands during the build is either in the
 * listing or has a `changed` serial above S: never lost. A change that could not be appended (the
 * writer logs it) leaves the name stale on other processes until its next change or a restart.
 */
import type { IndexConfig } from '../config/types.js';
import type { SearchChanges } from './changes.js';
import type { SearchEntry } from './entry.js';
import type { SearchQuery } from './query.js';
import { SearchIndex, type SearchResult } from './search-index.js';
import type { SearchSource } from './source.js';

type Log = { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };

/** Entries read at once while building or refreshing (store round trips in flight). */
const READ_CONCURRENCY = 8;
/** Own appends remembered per index between refreshes; past it they are forgotten (read again). */
const MAX_OWN = 4096;

export interface KeeperOptions {
  /** The indexes that hold entries (hosted and cached), with their ecosystem's source. */
  sources: ReadonlyArray<{ index: IndexConfig; source: SearchSource }>;
  changes: SearchChanges;
  refreshSecs: number;
  log: Log;
}

async function eachLimited<T>(items: readonly T[], limit: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await run(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export class SearchKeeper {
  readonly index = new SearchIndex();
  readonly #o: KeeperOptions;
  readonly #byName: Map<string, { index: IndexConfig; source: SearchSource }>;
  /** The change log serial each built index is current with. */
  readonly #seen = new Map<string, number>();
  /**
   * Per index, the serials of this process's own appends whose names it read again at the write
   * (`AppendListener`): a refresh does not read them a second time.
   */
  readonly #own = new Map<string, Map<string, number>>();
  /**
   * The indexes the first build has not tried yet: the refresh leaves them to it. (It used to
   * build any index not yet built, so a refresh during the first build read the index a second
   * time beside it, replacing every entry: that was the search's cost to uploads at 100k.)
   */
  readonly #unbuilt: Set<string>;
  #timer: NodeJS.Timeout | undefined;
  #refreshing: Promise<void> | undefined;
  #built: Promise<void> | undefined;
  #closed = false;

  constructor(opts: KeeperOptions) {
    this.#o = opts;
    this.#byName = new Map(opts.sources.map((s) => [s.index.name, s]));
    this.#unbuilt = new Set(this.#byName.keys());
    opts.changes.listen((indexName, names) => {
      // Not before `start` (an app built but never started keeps no index), and not awaited.
      if (this.#built !== undefined && !this.#closed) void this.#reread(indexName, names);
    });
    opts.changes.onAppended((indexName, appended) => this.#noteOwn(indexName, appended));
  }

  /** Whether every index has been built (a search before that may miss entries). */
  get complete(): boolean {
    return this.#seen.size === this.#byName.size;
  }

  /** The source of an index that holds entries, if any. */
  sourceOf(indexName: string): SearchSource | undefined {
    return this.#byName.get(indexName)?.source;
  }

  /** Starts the background build and the refresh timer; returns at once. */
  start(): void {
    if (this.#built !== undefined) return;
    this.#built = this.#buildAll();
    this.#timer = setInterval(() => {
      this.#refreshing ??= this.refresh().finally(() => (this.#refreshing = undefined));
    }, this.#o.refreshSecs * 1000);
    this.#timer.unref();
  }

  /** Resolves once the first build is done (tests and the bench wait for it; serving never does). */
  async ready(): Promise<void> {
    await this.#built;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await Promise.allSettled([this.#built, this.#refreshing]);
  }

  search(query: SearchQuery, keep: (entry: SearchEntry) => boolean): SearchResult {
    return this.index.search(query, keep);
  }

  async #buildAll(): Promise<void> {
    const started = Date.now();
    for (const { index, source } of this.#o.sources) {
      if (this.#closed) return;
      try {
        await this.#rebuild(index, source);
      } catch (err) {
        // Left unbuilt: the next refresh builds it again (`complete` stays false meanwhile).
        this.#o.log.warn({ index: index.name, err: err instanceof Error ? err.message : String(err) }, 'search: index not built; retrying on the next refresh');
      } finally {
        this.#unbuilt.delete(index.name);
      }
    }
    this.#o.log.info({ entries: this.index.size, ms: Date.now() - started }, 'search index built');
  }

  /** One refresh pass: every index's change log, and the names that changed since it was last seen. */
  async refresh(): Promise<void> {
    for (const { index, source } of this.#o.sources) {
      if (this.#closed) return;
      const seen = this.#seen.get(index.name);
      try {
        if (seen === undefined) {
          // The first build failed for this index: build it now (not while the first build has it to do).
          if (this.#built !== undefined && !this.#unbuilt.has(index.name)) await this.#rebuild(index, source);
          continue;
        }
        const doc = await this.#o.changes.read(index.name);
        if (!doc || doc.serial <= seen) continue;
        if ((doc.floor ?? 0) > seen) {
          await this.#rebuild(index, source);
          continue;
        }
        const own = this.#own.get(index.name);
        const moved = Object.entries(doc.changed ?? {})
          .filter(([name, serial]) => serial > seen && own?.get(name) !== serial)
          .map(([name]) => name);
        await eachLimited(moved, READ_CONCURRENCY, (key) => this.#load(index, source, key));
        this.#seen.set(index.name, doc.serial);
        if (own) for (const [name, serial] of own) if (serial <= doc.serial) own.delete(name);
      } catch (err) {
        this.#o.log.warn({ index: index.name, err: err instanceof Error ? err.message : String(err) }, 'search: refresh failed; retrying on the next one');
      }
    }
  }

  /** Reads every entry of the index (after its change log's serial), dropping those no longer listed. */
  async #rebuild(index: IndexConfig, source: SearchSource): Promise<void> {
    const serial = (await this.#o.changes.read(index.name))?.serial ?? 0;
    const keys = await source.keys(index);
    const listed = new Set(keys);
    for (const key of this.index.keysOf(index.name)) if (!listed.has(key)) this.index.remove(index.name, key);
    await eachLimited(keys, READ_CONCURRENCY, (key) => this.#load(index, source, key));
    this.#seen.set(index.name, serial);
  }

  /**
   * This process's appends: a name read again at its write is current at the serial its append
   * gave it, when the change before it was this process's own or one it had read by then (else
   * another process changed it just before, maybe after that read, and the refresh reads it).
   */
  #noteOwn(indexName: string, appended: ReadonlyMap<string, { serial: number; before: number | undefined }>): void {
    if (this.#built === undefined || this.#closed || !this.#byName.has(indexName)) return;
    const seen = this.#seen.get(indexName) ?? 0;
    let own = this.#own.get(indexName);
    if (!own) this.#own.set(indexName, (own = new Map()));
    for (const [name, { serial, before }] of appended) {
      if (before === undefined || before <= seen || own.get(name) === before) own.set(name, serial);
      else own.delete(name);
    }
    if (own.size > MAX_OWN) own.clear();
  }

  async #reread(indexName: string, names: readonly string[]): Promise<void> {
    const found = this.#byName.get(indexName);
    if (!found) return;
    await eachLimited(names, READ_CONCURRENCY, (key) => this.#load(found.index, found.source, key));
  }

  async #load(index: IndexConfig, source: SearchSource, key: string): Promise<void> {
    try {
      const entry = await source.entry(index, key);
      if (entry) this.index.put(entry);
      else this.index.remove(index.name, key);
    } catch (err) {
      this.#o.log.warn({ index: index.name, name: key, err: err instanceof Error ? err.message : String(err) }, 'search: entry not read');
    }
  }
}
