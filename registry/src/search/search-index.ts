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
 *
 * Memory: each word, folded name and classifier string is kept once and shared by the entries
 * that have it (the postings' keys); postings are arrays. About 1.3 KiB an entry of typical
 * Python metadata, measured by test/bench/search.ts.
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
  nameWords: string[];
  /** Distinct, in no order: an array, since a query tests a few words against a few dozen; each the posting's own string. */
  textWords: string[];
  /** The stamp of the last query that took it as a candidate. */
  mark: number;
}

/** Best first: higher score, then name, then index. */
function compareHits(a: Hit, b: Hit): number {
  return b.score - a.score || (a.entry.name < b.entry.name ? -1 : a.entry.name > b.entry.name ? 1 : 0) || (a.entry.index < b.entry.index ? -1 : a.entry.index > b.entry.index ? 1 : 0);
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

/** The entries of one key, with the key's one string instance (entries refer to it: words are kept once). */
interface Posting {
  key: string;
  items: Indexed[];
}

/**
 * Key -> entries, the entries of a key in an array (a Set costs several times the memory, and most
 * keys hold one to a few hundred entries). An entry is added under each of its keys once (`put`
 * removes its previous version first), so adding needs no search; a removal, which is rare, pays
 * a linear one.
 */
class MultiMap {
  readonly #map = new Map<string, Posting>();
  readonly sorted: SortedStrings | null;

  constructor(sortedKeys: boolean) {
    this.sorted = sortedKeys ? new SortedStrings() : null;
  }

  get(key: string): readonly Indexed[] | undefined {
    return this.#map.get(key)?.items;
  }

  /** Adds `item` under `key`; returns the key's shared string, for the entry to keep instead of its own copy. */
  add(key: string, item: Indexed): string {
    const posting = this.#map.get(key);
    if (posting) {
      posting.items.push(item);
      return posting.key;
    }
    this.#map.set(key, { key, items: [item] });
    this.sorted?.add(key);
    return key;
  }

  delete(key: string, item: Indexed): void {
    const posting = this.#map.get(key);
    const list = posting?.items;
    const at = list ? list.lastIndexOf(item) : -1;
    if (!list || at < 0) return;
    list[at] = list[list.length - 1]!;
    list.pop();
    if (list.length === 0) {
      this.#map.delete(key);
      this.sorted?.remove(key);
    }
  }

  /** The entries under every key that starts with `prefix` (an entry under two such keys comes twice). */
  *itemsWithPrefix(prefix: string): Generator<Indexed> {
    if (!this.sorted) throw new Error('prefix lookup on an unsorted map');
    for (const key of this.sorted.withPrefix(prefix)) yield* this.#map.get(key)!.items;
  }

  /** How many entries `itemsWithPrefix` would give, counting no further than `cap`. */
  countPrefix(prefix: string, cap: number): number {
    let n = 0;
    for (const key of this.sorted!.withPrefix(prefix)) {
      n += this.#map.get(key)!.items.length;
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
  #stamp = 0;

  /** Classifier strings, kept once each (a few hundred distinct ones are shared by every entry); bounded. */
  readonly #strings = new Map<string, string>();

  #shared(s: string): string {
    const found = this.#strings.get(s);
    if (found !== undefined) return found;
    if (this.#strings.size < 20_000) this.#strings.set(s, s);
    return s;
  }

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
      mark: 0,
    };
    // Each string is kept once: the entry refers to the postings' keys, and its name's folded form
    // and key are its name when they are equal (they are for most names).
    if (entry.key === entry.name) entry.key = entry.name;
    this.#entries.set(SearchIndex.id(entry.index, entry.key), item);
    item.folded = this.#byName.add(item.folded === entry.name ? entry.name : item.folded, item);
    item.nameWords = item.nameWords.map((w) => this.#byNameWord.add(w, item));
    item.textWords = item.textWords.map((w) => this.#byTextWord.add(w, item));
    if (entry.classifiers) entry.classifiers = entry.classifiers.map((c) => this.#shared(c));
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
    // Only the hits up to the end of the asked page are ordered (kept sorted as they come, most
    // rejected by one comparison with the last kept): a broad query does not sort all its matches.
    const needed = query.page * query.perPage;
    const best: Hit[] = [];
    let total = 0;
    for (const item of candidates) {
      const kind = this.#match(item, query);
      if (kind === null || !keep(item.entry)) continue;
      total += 1;
      const hit: Hit = { entry: item.entry, kind, score: 4 - RANK[kind] + 1 / (1 + item.folded.length) };
      if (best.length === needed && compareHits(hit, best[needed - 1]!) >= 0) continue;
      let lo = 0;
      let hi = best.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (compareHits(best[mid]!, hit) <= 0) lo = mid + 1;
        else hi = mid;
      }
      best.splice(lo, 0, hit);
      if (best.length > needed) best.pop();
    }
    return { hits: best.slice((query.page - 1) * query.perPage), total, truncated };
  }

  /**
   * Every entry that could match: all those whose name starts with the query as a name, and those
   * of its rarest word (a name word starting with it, or a text word equal to it). Bounded by
   * `MAX_CANDIDATES` from each; each entry once (marked with the query's stamp: no Set to build).
   */
  #candidates(query: Pick<SearchQuery, 'name' | 'words'>): { candidates: Indexed[]; truncated: boolean } {
    const stamp = ++this.#stamp;
    const candidates: Indexed[] = [];
    const take = (items: Iterable<Indexed>, cap: number): boolean => {
      for (const item of items) {
        if (item.mark === stamp) continue;
        if (candidates.length >= cap) return false;
        item.mark = stamp;
        candidates.push(item);
      }
      return true;
    };
    let complete = true;
    if (query.name !== null) complete = take(this.#byName.itemsWithPrefix(query.name), MAX_CANDIDATES);
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
      const cap = candidates.length + MAX_CANDIDATES;
      complete = take(this.#byNameWord.itemsWithPrefix(rarest), cap) && take(this.#byTextWord.get(rarest) ?? [], cap) && complete;
    }
    return { candidates, truncated: !complete };
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
