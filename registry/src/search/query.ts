/**
 * The parameters of a search request, checked once: `q` (required), `ecosystem`, `index`, `page`,
 * `per_page`. Every refusal is a `SearchQueryError` whose message says what to send instead; the
 * route answers it with 400.
 */
import { foldName, wordsOf } from './fold.js';

export const MAX_QUERY_CHARS = 200;
export const MAX_QUERY_WORDS = 8;
export const DEFAULT_PER_PAGE = 20;
export const MAX_PER_PAGE = 100;
/** Pages past this are refused: a search is for finding, not for listing everything. */
export const MAX_PAGE = 100;

export class SearchQueryError extends Error {
  constructor(
    readonly parameter: string,
    message: string,
  ) {
    super(message);
  }
}

export interface SearchQuery {
  /** `q` as given, trimmed. */
  text: string;
  /** `q` folded like a name (foldName), when it is one token that could be a name; null otherwise. */
  name: string | null;
  /** The words of `q` (lowercase, deduplicated, in order): every one must match. */
  words: string[];
  ecosystem?: string;
  index?: string;
  page: number;
  perPage: number;
}

/** A token a name can be (letters, digits, `-_./`), so exact and prefix matches apply. */
const NAME_TOKEN = /^[\p{L}\p{N}._/-]+$/u;

function positiveInt(params: URLSearchParams, key: string, fallback: number, max: number): number {
  const raw = params.get(key);
  if (raw === null || raw === '') return fallback;
  if (!/^\d{1,6}$/.test(raw) || Number(raw) < 1) throw new SearchQueryError(key, `${key} must be a whole number from 1 to ${max}, not ${JSON.stringify(raw.slice(0, 20))}`);
  const n = Number(raw);
  if (n > max) throw new SearchQueryError(key, `${key} must be at most ${max}; narrow the search with more words, ecosystem= or index=`);
  return n;
}

function single(params: URLSearchParams, key: string): string | undefined {
  const all = params.getAll(key);
  if (all.length > 1) throw new SearchQueryError(key, `${key} may be given once`);
  const v = all[0];
  return v === undefined || v === '' ? undefined : v;
}

export function parseSearchQuery(params: URLSearchParams): SearchQuery {
  const raw = single(params, 'q');
  if (raw === undefined || raw.trim() === '') throw new SearchQueryError('q', 'q is required: what to search for, e.g. /+search?q=requests');
  const text = raw.trim();
  if (text.length > MAX_QUERY_CHARS) throw new SearchQueryError('q', `q is ${text.length} characters; at most ${MAX_QUERY_CHARS} are searched`);
  const words = [...new Set(wordsOf(text))];
  if (words.length === 0) throw new SearchQueryError('q', 'q has no letters or digits to search for');
  if (words.length > MAX_QUERY_WORDS) throw new SearchQueryError('q', `q has ${words.length} words; at most ${MAX_QUERY_WORDS} are searched`);
  const ecosystem = single(params, 'ecosystem');
  const index = single(params, 'index');
  return {
    text,
    name: NAME_TOKEN.test(text) ? foldName(text) : null,
    words,
    ...(ecosystem !== undefined ? { ecosystem } : {}),
    ...(index !== undefined ? { index } : {}),
    page: positiveInt(params, 'page', 1, MAX_PAGE),
    perPage: positiveInt(params, 'per_page', DEFAULT_PER_PAGE, MAX_PER_PAGE),
  };
}
