/**
 * Paging of the sorted lists `/v2/` serves (tag lists, the catalog): `n` caps the page, `last`
 * resumes after an entry, and a truncated page links to the next one, as the distribution spec's
 * `Link: <...>; rel="next"`.
 */

export interface PageQuery {
  /** The most entries a page holds; absent: all of them. */
  n?: number;
  /** Resume after this entry; absent: from the start. */
  last?: string;
}

export interface Page {
  entries: string[];
  /** The `last` of the next page, when this one was truncated. */
  next?: string;
}

/** Code-unit order, the order `last` compares in (not the locale's). */
export function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** `n` counts only as plain digits (anything else reads as no cap, as before); `last` as given. */
export function parsePageQuery(query: URLSearchParams): PageQuery {
  const page: PageQuery = {};
  const n = query.get('n');
  if (n !== null && /^\d+$/.test(n)) page.n = Math.min(Number(n), Number.MAX_SAFE_INTEGER);
  const last = query.get('last');
  if (last !== null) page.last = last;
  return page;
}

/** One page of `sorted` (sorted `byCodeUnit`, no duplicates). */
export function pageOf(sorted: readonly string[], query: PageQuery): Page {
  const { n, last } = query;
  const after = last === undefined ? sorted : sorted.filter((entry) => entry > last);
  const entries = n === undefined ? [...after] : after.slice(0, n);
  const marker = entries.at(-1);
  return entries.length < after.length && marker !== undefined ? { entries, next: marker } : { entries };
}

/** The `Link` header to the next page of `path` (a path without query). */
export function nextLink(path: string, n: number, last: string): string {
  return `<${path}?n=${n}&last=${encodeURIComponent(last)}>; rel="next"`;
}
