/**
 * The derived search index of one process: every entry of every index, with lookup structures
 * that make a query's cost depend on how many entries match its words, never on how many indexes
 * or entries there are:
 *
 * - `byName`: folded name -> entries (exact match), with the distinct folded names sorted for
 *   prefix matches (binary search, then a walk over the matching range only);
 * - `byNameWord`: each word of a name -> entries, its distinct words sorted the same way, so a
 *   query word matches the start of a name word (`date` finds `python-dateutil`);
 * - `byTextWord`: each word of the summary, title, keywords and classifiers -> entries (whole
 *   words only: prefixes of prose would match nearly everything).
 *
 * A query takes the candidates of its rarest word (or its name prefix), at most
 * `MAX_CANDIDATES`, and checks each against every word and the caller's filter (policy, access,
 * ecosystem, index): that bound is the worst case of a query. Ranking: exact name, then name
 * prefix (shorter names first), then every word in the name, then words in the text; ties by name.
 */
import { boundedEntry, type SearchEntry } from './entry.js';
import { foldName, nameWords, wordsOf } from './fold.js';
import type { SearchQuery } from './query.js';
import { SortedStrings } from './sorted.js';

/** The most entries one query looks at; past it the result says `truncated`. */
export const MAX_CANDIDATES = 20_000;

export type MatchKind = 'exact' | 'prefix' | 'name' | 'text';
const RANK: Record<MatchKind, number> = { exact: 0, prefix: 1, name: 2, text: 3 };

interface Indexed {
  entry: SearchEntry;
  folded: string;
  nameWords: readonly string[];
  /** Distinct, in no order: an array, since a query tests a few words against a few dozen. */
  textWords: readonly string[];
}

export interface Hit {
  entry: SearchEntry;
  kind: MatchKind;
  /** Higher is better: 4 for exact down to 1 for text, with a fraction that prefers short names. */
  score: number;
}

export interface SearchResult {
  hits: Hit[];
  /** Matches found (before paging). */
  total: number;
  /** The candidate bound was reached: more entries may match than `total` says. */
  truncated: boolean;
}

/**
 * Key -> entries, the entries of a key in an array (a Set costs several times the memory, and most
 * keys hold one to a few hundred entries; a removal, which is rare, pays the linear search).
 */
class MultiMap {
  readonly #map = new Map<string, Indexed[]>();
  readonly sorted: SortedStrings | null;

  constructor(sortedKeys: boolean) {
    this.sorted = sortedKeys ? new SortedStrings() : null;
  }

  get(key: string): readonly Indexed[] | undefined {
    return this.#map.get(key);
  }

  add(key: string, item: Indexed): void {
    const list = this.#map.get(key);
    if (list) {
      if (!list.includes(item)) list.push(item);
      return;
    }
    this.#map.set(key, [item]);
    this.sorted?.add(key);
  }

  delete(key: string, item: Indexed): void {
    const list = this.#map.get(key);
    const at = list ? list.indexOf(item) : -1;
    if (!list || at < 0) return;
    list[at] = list[list.length - 1]!;
    list.pop();
    if (list.length === 0) {
      this.#map.delete(key);
      this.sorted?.remove(key);
    }
  }

  /** The entries under every key that starts with `prefix`, added to `into` until it holds `cap`. */
  withPrefix(prefix: string, cap: number, into: Set<Indexed> = new Set()): Set<Indexed> {
    if (!this.sorted) throw new Error('prefix lookup on an unsorted map');
    for (const key of this.sorted.withPrefix(prefix)) {
      for (const item of this.#map.get(key)!) {
        if (into.size >= cap) return into;
        into.add(item);
      }
    }
    return into;
  }

  /** How many entries `withPrefix` would give, counting no further than `cap`. */
  countPrefix(prefix: string, cap: number): number {
    let n = 0;
    for (const key of this.sorted!.withPrefix(prefix)) {
      n += this.#map.get(key)!.length;
      if (n >= cap) return cap;
    }
    return n;
  }
}

function textOf(entry: SearchEntry): string[] {
  return [entry.summary, entry.title, ...(entry.keywords ?? []), ...(entry.classifiers ?? [])].filter((s): s is string => s !== undefined);
}

export class SearchIndex {
  readonly #entries = new Map<string, Indexed>();
  readonly #byName = new MultiMap(true);
  readonly #byNameWord = new MultiMap(true);
  readonly #byTextWord = new MultiMap(false);

  static id(index: string, key: string): string {
    return `${index}\u0000${key}`;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(index: string, key: string): SearchEntry | undefined {
    return this.#entries.get(SearchIndex.id(index, key))?.entry;
  }

  /** Adds or replaces the entry of (`entry.index`, `entry.key`). */
  put(raw: SearchEntry): void {
    const entry = boundedEntry(raw);
    this.remove(entry.index, entry.key);
    const item: Indexed = {
      entry,
      folded: foldName(entry.name),
      nameWords: [...new Set(nameWords(entry.name))],
      textWords: [...new Set(textOf(entry).flatMap(wordsOf))],
    };
    this.#entries.set(SearchIndex.id(entry.index, entry.key), item);
    this.#byName.add(item.folded, item);
    for (const w of item.nameWords) this.#byNameWord.add(w, item);
    for (const w of item.textWords) this.#byTextWord.add(w, item);
  }

  remove(index: string, key: string): void {
    const id = SearchIndex.id(index, key);
    const item = this.#entries.get(id);
    if (!item) return;
    this.#entries.delete(id);
    this.#byName.delete(item.folded, item);
    for (const w of item.nameWords) this.#byNameWord.delete(w, item);
    for (const w of item.textWords) this.#byTextWord.delete(w, item);
  }

  /** Drops every entry of `index` (an index no longer configured). */
  removeIndex(index: string): void {
    for (const item of [...this.#entries.values()]) if (item.entry.index === index) this.remove(index, item.entry.key);
  }

  /** Every entry of `index`'s keys (for the refresher's comparisons). */
  keysOf(index: string): string[] {
    const keys: string[] = [];
    for (const item of this.#entries.values()) if (item.entry.index === index) keys.push(item.entry.key);
    return keys;
  }

  /** The matches of `query` that `keep` lets through, ranked, paged by `query.page`/`perPage`. */
  search(query: Pick<SearchQuery, 'name' | 'words' | 'page' | 'perPage'>, keep: (entry: SearchEntry) => boolean = () => true): SearchResult {
    const { candidates, truncated } = this.#candidates(query);
    const hits: Hit[] = [];
    for (const item of candidates) {
      const kind = this.#match(item, query);
      if (kind === null || !keep(item.entry)) continue;
      hits.push({ entry: item.entry, kind, score: 4 - RANK[kind] + 1 / (1 + item.folded.length) });
    }
    hits.sort((a, b) => b.score - a.score || (a.entry.name < b.entry.name ? -1 : a.entry.name > b.entry.name ? 1 : 0) || (a.entry.index < b.entry.index ? -1 : a.entry.index > b.entry.index ? 1 : 0));
    const start = (query.page - 1) * query.perPage;
    return { hits: hits.slice(start, start + query.perPage), total: hits.length, truncated };
  }

  /**
   * Every entry that could match: all those whose name starts with the query as a name, and those
   * of its rarest word (a name word starting with it, or a text word equal to it). Bounded by
   * `MAX_CANDIDATES`.
   */
  #candidates(query: Pick<SearchQuery, 'name' | 'words'>): { candidates: Set<Indexed>; truncated: boolean } {
    const candidates = new Set<Indexed>();
    if (query.name !== null) {
      const exact = this.#byName.get(query.name);
      for (const item of exact ?? []) candidates.add(item);
      this.#byName.withPrefix(query.name, MAX_CANDIDATES, candidates);
    }
    let rarest: string | undefined;
    let fewest = Infinity;
    for (const w of query.words) {
      const n = this.#byNameWord.countPrefix(w, MAX_CANDIDATES) + (this.#byTextWord.get(w)?.length ?? 0);
      if (n < fewest) {
        fewest = n;
        rarest = w;
      }
    }
    if (rarest !== undefined && fewest > 0) {
      this.#byNameWord.withPrefix(rarest, candidates.size + MAX_CANDIDATES, candidates);
      for (const item of this.#byTextWord.get(rarest) ?? []) {
        if (candidates.size >= 2 * MAX_CANDIDATES) break;
        candidates.add(item);
      }
    }
    return { candidates, truncated: fewest >= MAX_CANDIDATES || candidates.size >= 2 * MAX_CANDIDATES };
  }

  #match(item: Indexed, query: Pick<SearchQuery, 'name' | 'words'>): MatchKind | null {
    if (query.name !== null) {
      if (item.folded === query.name) return 'exact';
      if (item.folded.startsWith(query.name)) return 'prefix';
    }
    const inName = (w: string) => item.nameWords.some((nw) => nw.startsWith(w));
    if (query.words.every(inName)) return 'name';
    if (query.words.every((w) => inName(w) || item.textWords.includes(w))) return 'text';
    return null;
  }
}
