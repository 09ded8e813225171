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
import { boundedEntry, sameEntry, type SearchEntry } from './entry.js';
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
  /** False once removed: the postings that still list it drop it when they are compacted. */
  live: boolean;
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

/**
 * The entries of one key, with the key's one string instance (entries refer to it: words are kept
 * once). `stale` counts the places in `items` that no longer belong there: an entry removed, or
 * replaced by a version without this key, or listed twice after it got the key back.
 */
interface Posting {
  key: string;
  items: Indexed[];
  stale: number;
}

/**
 * Key -> entries, the entries of a key in an array (a Set costs several times the memory, and most
 * keys hold one to a few hundred entries). Adding is a push. Leaving is lazy: finding an entry in
 * a posting costs the posting's length (100k for a classifier word every entry has, so a rebuild
 * that replaced every entry cost minutes), so a leaving entry only counts as stale, and a posting
 * is compacted (one pass) once half of it is stale: each leave costs O(1) amortised, and a
 * posting holds at most twice its live entries. Readers skip what is not live; a live entry
 * still listed under a key it lost is a candidate its query's full check then rejects.
 */
class MultiMap {
  readonly #map = new Map<string, Posting>();
  readonly sorted: SortedStrings | null;

  constructor(
    sortedKeys: boolean,
    /** Whether `item`, as it is now, has `key` (what compaction keeps). */
    private readonly holds: (item: Indexed, key: string) => boolean,
  ) {
    this.sorted = sortedKeys ? new SortedStrings() : null;
  }

  /** The entries listed under `key`: may hold stale ones (skip those not live). */
  get(key: string): readonly Indexed[] | undefined {
    return this.#map.get(key)?.items;
  }

  /** How many entries `key` holds (stale places not counted). */
  count(key: string): number {
    const posting = this.#map.get(key);
    return posting ? posting.items.length - posting.stale : 0;
  }

  /** The shared string of `key`, if some entry has it. */
  keyOf(key: string): string | undefined {
    return this.#map.get(key)?.key;
  }

  /** Adds `item` under `key`; returns the key's shared string, for the entry to keep instead of its own copy. */
  add(key: string, item: Indexed): string {
    const posting = this.#map.get(key);
    if (posting) {
      posting.items.push(item);
      return posting.key;
    }
    this.#map.set(key, { key, items: [item], stale: 0 });
    this.sorted?.add(key);
    return key;
  }

  /** One entry no longer has `key` (it was removed, or its new version lacks the key). */
  leave(key: string): void {
    const posting = this.#map.get(key);
    if (!posting) return;
    posting.stale += 1;
    if (posting.stale * 2 >= posting.items.length) this.#compact(posting);
  }

  #compact(posting: Posting): void {
    const kept = new Set<Indexed>();
    for (const item of posting.items) if (item.live && this.holds(item, posting.key)) kept.add(item);
    posting.items = [...kept];
    posting.stale = 0;
    if (posting.items.length === 0) {
      this.#map.delete(posting.key);
      this.sorted?.remove(posting.key);
    }
  }

  /** The entries under every key that starts with `prefix` (an entry under two such keys comes twice; stale ones too). */
  *itemsWithPrefix(prefix: string): Generator<Indexed> {
    if (!this.sorted) throw new Error('prefix lookup on an unsorted map');
    for (const key of this.sorted.withPrefix(prefix)) yield* this.#map.get(key)!.items;
  }

  /** How many entries `itemsWithPrefix` would give (stale places not counted), counting no further than `cap`. */
  countPrefix(prefix: string, cap: number): number {
    let n = 0;
    for (const key of this.sorted!.withPrefix(prefix)) {
      n += this.count(key);
      if (n >= cap) return cap;
    }
    return n;
  }
}

/** What a removed entry is left holding while postings still list it: nothing of its own. */
const GONE: SearchEntry = Object.freeze({ ecosystem: '', index: '', name: '', key: '' });

function textOf(entry: SearchEntry): string[] {
  return [entry.summary, entry.title, ...(entry.keywords ?? []), ...(entry.classifiers ?? [])].filter((s): s is string => s !== undefined);
}

export class SearchIndex {
  readonly #entries = new Map<string, Indexed>();
  readonly #byName = new MultiMap(true, (item, key) => item.folded === key);
  readonly #byNameWord = new MultiMap(true, (item, key) => item.nameWords.includes(key));
  readonly #byTextWord = new MultiMap(false, (item, key) => item.textWords.includes(key));
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

  /**
   * Adds or replaces the entry of (`entry.index`, `entry.key`). An entry equal to the one held
   * changes nothing (a rebuild or refresh reads many unchanged ones); a changed one is updated in
   * place, so only the keys it gained or lost move (a new version with the same metadata moves
   * none).
   */
  put(raw: SearchEntry): void {
    const entry = boundedEntry(raw);
    const id = SearchIndex.id(entry.index, entry.key);
    const held = this.#entries.get(id);
    if (held && sameEntry(held.entry, entry)) return;
    // Each string is kept once: the entry refers to the postings' keys, and its name's folded form
    // and key are its name when they are equal (they are for most names).
    if (entry.key === entry.name) entry.key = entry.name;
    if (entry.classifiers) entry.classifiers = entry.classifiers.map((c) => this.#shared(c));
    const folded = foldName(entry.name);
    const next = {
      folded: [folded === entry.name ? entry.name : folded],
      nameWords: [...new Set(nameWords(entry.name))],
      textWords: [...new Set(textOf(entry).flatMap(wordsOf))],
    };
    const item: Indexed = held ?? { entry, folded: '', nameWords: [], textWords: [], mark: 0, live: true };
    if (!held) this.#entries.set(id, item);
    const before = { folded: held ? [held.folded] : [], nameWords: item.nameWords, textWords: item.textWords };
    item.entry = entry;
    item.folded = this.#join(this.#byName, item, before.folded, next.folded)[0]!;
    item.nameWords = this.#join(this.#byNameWord, item, before.nameWords, next.nameWords);
    item.textWords = this.#join(this.#byTextWord, item, before.textWords, next.textWords);
    // Only once the entry holds its new keys: a posting compacted now keeps it exactly where it belongs.
    this.#leave(this.#byName, before.folded, next.folded);
    this.#leave(this.#byNameWord, before.nameWords, next.nameWords);
    this.#leave(this.#byTextWord, before.textWords, next.textWords);
  }

  /** `after`'s keys as the postings' shared strings, `item` added under those `before` lacks. */
  #join(map: MultiMap, item: Indexed, before: readonly string[], after: readonly string[]): string[] {
    const had = new Set(before);
    return after.map((key) => (had.has(key) ? map.keyOf(key) : undefined) ?? map.add(key, item));
  }

  /** One entry leaves the keys of `before` that `after` lacks. */
  #leave(map: MultiMap, before: readonly string[], after: readonly string[]): void {
    const has = new Set(after);
    for (const key of before) if (!has.has(key)) map.leave(key);
  }

  remove(index: string, key: string): void {
    const id = SearchIndex.id(index, key);
    const item = this.#entries.get(id);
    if (!item) return;
    this.#entries.delete(id);
    const { folded, nameWords, textWords } = item;
    // What postings still list until they are compacted holds nothing of the entry.
    item.live = false;
    item.entry = GONE;
    item.folded = '';
    item.nameWords = [];
    item.textWords = [];
    this.#byName.leave(folded);
    for (const w of nameWords) this.#byNameWord.leave(w);
    for (const w of textWords) this.#byTextWord.leave(w);
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
        if (item.mark === stamp || !item.live) continue;
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
      const n = this.#byNameWord.countPrefix(w, MAX_CANDIDATES) + this.#byTextWord.count(w);
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
