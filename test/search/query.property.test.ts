/**
 * The search query parser, for any input: it returns a query or throws a `SearchQueryError` naming
 * a parameter (never anything else); a query's words are lowercase letters and digits of `q`, at
 * least one and at most MAX_QUERY_WORDS; paging stays within its bounds; surrounding spaces change
 * nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { foldName } from '../../registry/src/search/fold.js';
import { MAX_PAGE, MAX_PER_PAGE, MAX_QUERY_WORDS, parseSearchQuery, SearchQueryError, type SearchQuery } from '../../registry/src/search/query.js';

const RUNS = { numRuns: 500 };

const qText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.constantFrom('requests', 'Python_DateUtil', 'team/api-server', '  flask  ', '---', '', ' ', 'a b c d e f g h i', '<script>alert(1)</script>', 'ünïcödé naïve'),
  fc.array(fc.constantFrom('web', 'api', 'http', 'x', '-', '_', '.', '/', ' '), { maxLength: 12 }).map((p) => p.join('')),
);
const numberText = fc.oneof(fc.constant(undefined), fc.nat(200).map(String), fc.constantFrom('', '0', '-1', '1.5', 'abc', '1e3', '0001', '9999999'));

function params(q: string | undefined, page?: string, perPage?: string): URLSearchParams {
  const p = new URLSearchParams();
  if (q !== undefined) p.set('q', q);
  if (page !== undefined) p.set('page', page);
  if (perPage !== undefined) p.set('per_page', perPage);
  return p;
}

function parse(p: URLSearchParams): SearchQuery | SearchQueryError {
  try {
    return parseSearchQuery(p);
  } catch (err) {
    if (err instanceof SearchQueryError) return err;
    throw err;
  }
}

describe('parseSearchQuery', () => {
  it('returns a bounded query or a SearchQueryError, never anything else', () => {
    fc.assert(
      fc.property(fc.option(qText, { nil: undefined }), numberText, numberText, (q, page, perPage) => {
        const out = parse(params(q, page, perPage));
        if (out instanceof SearchQueryError) {
          expect(['q', 'page', 'per_page']).toContain(out.parameter);
          expect(out.message.length).toBeGreaterThan(10);
          return;
        }
        expect(out.words.length).toBeGreaterThan(0);
        expect(out.words.length).toBeLessThanOrEqual(MAX_QUERY_WORDS);
        for (const w of out.words) {
          expect(w).toBe(w.toLowerCase());
          expect(w).toMatch(/^[\p{L}\p{N}]+$/u);
          expect(q!.toLowerCase()).toContain(w);
        }
        expect(new Set(out.words).size).toBe(out.words.length);
        expect(out.page).toBeGreaterThanOrEqual(1);
        expect(out.page).toBeLessThanOrEqual(MAX_PAGE);
        expect(out.perPage).toBeGreaterThanOrEqual(1);
        expect(out.perPage).toBeLessThanOrEqual(MAX_PER_PAGE);
        if (out.name !== null) expect(out.name).toBe(foldName(out.text));
      }),
      RUNS,
    );
  });

  it('ignores the spaces around q', () => {
    fc.assert(
      fc.property(qText, fc.constantFrom('', ' ', '  ', '\t'), (q, pad) => {
        const a = parse(params(q));
        const b = parse(params(`${pad}${q}${pad}`));
        if (a instanceof SearchQueryError) expect(b).toBeInstanceOf(SearchQueryError);
        else expect(b).toEqual(a);
      }),
      RUNS,
    );
  });

  it('names the parameter and the fix', () => {
    expect(() => parseSearchQuery(params(undefined))).toThrow(/q is required/);
    expect(() => parseSearchQuery(params('---'))).toThrow(/no letters or digits/);
    expect(() => parseSearchQuery(params('x'.repeat(201)))).toThrow(/at most 200/);
    expect(() => parseSearchQuery(params('ok', undefined, '101'))).toThrow(/per_page must be at most 100/);
    expect(() => parseSearchQuery(params('ok', '0'))).toThrow(/page must be a whole number/);
    const twice = new URLSearchParams('q=a&q=b');
    expect(() => parseSearchQuery(twice)).toThrow(/q may be given once/);
    expect(parseSearchQuery(params('Python_DateUtil'))).toMatchObject({ name: 'python-dateutil', words: ['python', 'dateutil'], page: 1, perPage: 20 });
    expect(parseSearchQuery(params('web server'))).toMatchObject({ name: null, words: ['web', 'server'] });
  });
});
