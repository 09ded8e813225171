/**
 * The in-memory search index: ranking (exact name > name prefix > words in the name > words in
 * the text), PEP 503 folding, replacement and removal, filters, paging, bounded fields, and a
 * property: whatever is put and removed, a search finds exactly the live entries that match.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SearchEntry } from '../../registry/src/search/entry.js';
import { parseSearchQuery } from '../../registry/src/search/query.js';
import { SearchIndex } from '../../registry/src/search/search-index.js';

const py = (index: string, name: string, extra: Partial<SearchEntry> = {}): SearchEntry => ({ ecosystem: 'python', index, name, key: name.toLowerCase().replace(/[-_.]+/g, '-'), ...extra });
const q = (text: string, more: Record<string, string> = {}) => parseSearchQuery(new URLSearchParams({ q: text, ...more }));
const names = (index: SearchIndex, text: string) => index.search(q(text)).hits.map((h) => `${h.entry.index}:${h.entry.name}:${h.kind}`);

describe('SearchIndex', () => {
  it('ranks exact name, then name prefix (shorter first), then words in the name, then text', () => {
    const ix = new SearchIndex();
    ix.put(py('a', 'requests-toolbelt'));
    ix.put(py('a', 'requests'));
    ix.put(py('a', 'requests-oauthlib'));
    ix.put(py('a', 'types-requests'));
    ix.put(py('a', 'httpx', { summary: 'A next generation HTTP client; like requests' }));
    ix.put(py('a', 'unrelated', { summary: 'nothing to see' }));
    expect(names(ix, 'requests')).toEqual(['a:requests:exact', 'a:requests-oauthlib:prefix', 'a:requests-toolbelt:prefix', 'a:types-requests:name', 'a:httpx:text']);
  });

  it('folds names like PEP 503 and matches the start of name words', () => {
    const ix = new SearchIndex();
    ix.put(py('a', 'Python_DateUtil'));
    expect(names(ix, 'python.dateutil')).toEqual(['a:Python_DateUtil:exact']);
    expect(names(ix, 'PYTHON-DATE')).toEqual(['a:Python_DateUtil:prefix']);
    expect(names(ix, 'date')).toEqual(['a:Python_DateUtil:name']);
    expect(names(ix, 'dateutil python')).toEqual(['a:Python_DateUtil:name']);
    expect(names(ix, 'util')).toEqual([]);
  });

  it('needs every word; text words match whole', () => {
    const ix = new SearchIndex();
    ix.put(py('a', 'flask', { summary: 'A simple framework for building complex web applications.', keywords: ['wsgi'], classifiers: ['Framework :: Flask'] }));
    expect(names(ix, 'web framework')).toEqual(['a:flask:text']);
    expect(names(ix, 'wsgi')).toEqual(['a:flask:text']);
    expect(names(ix, 'web django')).toEqual([]);
    expect(names(ix, 'frame')).toEqual([]);
  });

  it('keeps one entry per index and key: a put replaces, a remove drops', () => {
    const ix = new SearchIndex();
    ix.put(py('a', 'demo', { summary: 'old words' }));
    ix.put(py('b', 'demo'));
    ix.put(py('a', 'Demo', { key: 'demo', summary: 'new words' }));
    expect(ix.size).toBe(2);
    expect(names(ix, 'old')).toEqual([]);
    expect(names(ix, 'new')).toEqual(['a:Demo:text']);
    expect(names(ix, 'demo')).toEqual(['a:Demo:exact', 'b:demo:exact']);
    ix.remove('a', 'demo');
    expect(names(ix, 'demo')).toEqual(['b:demo:exact']);
    ix.removeIndex('b');
    expect(ix.size).toBe(0);
  });

  it('counts exactly through replacements and removals under a word every entry has', () => {
    // Postings drop what left them lazily (search-index.ts `MultiMap`): totals must not see it.
    const ix = new SearchIndex();
    const total = (text: string) => ix.search(q(text)).total;
    for (let i = 0; i < 3000; i++) ix.put(py('a', `p${i}`, { summary: 'common first', classifiers: ['Topic :: Common'] }));
    for (let i = 0; i < 3000; i++) ix.put(py('a', `p${i}`, { summary: `common second n${i % 7}`, classifiers: ['Topic :: Common'] }));
    for (let i = 0; i < 3000; i += 3) ix.remove('a', `p${i}`);
    for (let i = 0; i < 3000; i += 6) ix.put(py('a', `p${i}`, { summary: 'common first again' }));
    expect(total('common')).toBe(2500);
    expect(total('topic')).toBe(2000);
    expect(total('first')).toBe(500);
    expect(total('second')).toBe(2000);
    expect(total('n0')).toBe([...Array(3000).keys()].filter((i) => i % 3 !== 0 && i % 7 === 0).length);
    // Removed: a multiple of 3 not put again (those of 6 were).
    expect(total('p1')).toBe([...Array(3000).keys()].filter((i) => String(i).startsWith('1') && !(i % 3 === 0 && i % 6 !== 0)).length);
    // An unchanged entry put again is the same entry.
    const before = ix.search(q('p1')).hits[0]!.entry;
    ix.put(py('a', 'p1', { summary: `common second n1`, classifiers: ['Topic :: Common'] }));
    expect(ix.search(q('p1')).hits[0]!.entry).toBe(before);
  });

  it('applies the filter and pages after ranking', () => {
    const ix = new SearchIndex();
    for (let i = 0; i < 30; i++) ix.put(py(i % 2 ? 'odd' : 'even', `pkg-${String(i).padStart(2, '0')}`));
    const even = ix.search(q('pkg', { per_page: '5', page: '2' }), (e) => e.index === 'even');
    expect(even.total).toBe(15);
    expect(even.hits.map((h) => h.entry.name)).toEqual(['pkg-10', 'pkg-12', 'pkg-14', 'pkg-16', 'pkg-18']);
    expect(ix.search(q('pkg', { page: '4', per_page: '10' })).hits).toEqual([]);
  });

  it('bounds what an entry keeps', () => {
    const ix = new SearchIndex();
    ix.put(py('a', 'big', { summary: 'x'.repeat(10_000), keywords: Array.from({ length: 1000 }, (_, i) => `k${i}`) }));
    const entry = ix.get('a', 'big')!;
    expect(entry.summary!.length).toBe(512);
    expect(entry.keywords!.length).toBe(32);
    expect(names(ix, 'k31')).toEqual(['a:big:text']);
    expect(names(ix, 'k32')).toEqual([]);
  });

  it('finds exactly the live entries that match, whatever was put and removed', () => {
    const word = fc.constantFrom('web', 'api', 'http', 'client', 'server', 'db', 'x');
    const name = fc.array(word, { minLength: 1, maxLength: 3 }).chain((ws) => fc.constantFrom('-', '_', '.').map((sep) => ws.join(sep)));
    const op = fc.oneof(
      fc.record({ put: fc.constant(true), index: fc.constantFrom('a', 'b'), name, summary: fc.array(word, { maxLength: 3 }).map((w) => w.join(' ')) }),
      fc.record({ put: fc.constant(false), index: fc.constantFrom('a', 'b'), name }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), fc.array(word, { minLength: 1, maxLength: 2 }), (ops, words) => {
        const ix = new SearchIndex();
        const live = new Map<string, SearchEntry>();
        for (const o of ops) {
          const entry = py(o.index, o.name, 'summary' in o && o.summary ? { summary: o.summary } : {});
          if (o.put) {
            ix.put(entry);
            live.set(`${o.index}/${entry.key}`, entry);
          } else {
            ix.remove(o.index, entry.key);
            live.delete(`${o.index}/${entry.key}`);
          }
        }
        const text = words.join(' ');
        const found = ix.search(q(text, { per_page: '100' })).hits.map((h) => `${h.entry.index}/${h.entry.key}`).sort();
        const expected = [...live.entries()]
          .filter(([, e]) => {
            const nameWords = e.name.toLowerCase().split(/[-_.]/);
            const textWords = (e.summary ?? '').split(' ');
            const folded = e.key;
            if (!text.includes(' ') && folded.startsWith(text)) return true;
            return words.every((w) => nameWords.some((n) => n.startsWith(w)) || textWords.includes(w));
          })
          .map(([k]) => k)
          .sort();
        expect(found).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });
});
