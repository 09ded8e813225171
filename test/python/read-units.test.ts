/** The read side's pure parts: content negotiation, filename lookup, PEP 440 order. */
import { describe, expect, it } from 'vitest';
import { candidateProjects } from '../../registry/src/python/read/source/lookup.js';
import { compareVersions, normalizeVersion } from '../../registry/src/python/model/pep440.js';
import { PageCache } from '../../registry/src/python/handlers/page-cache.js';
import { negotiate } from '../../registry/src/python/handlers/simple/negotiate.js';
import { pep700Time } from '../../registry/src/python/model/resolved.js';

describe('Simple API content negotiation', () => {
  const cases: [string | undefined, string][] = [
    // pip 26
    ['application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01', 'application/vnd.pypi.simple.v1+json'],
    // uv
    ['application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01', 'application/vnd.pypi.simple.v1+json'],
    [undefined, 'text/html; charset=utf-8'],
    ['', 'text/html; charset=utf-8'],
    ['*/*', 'text/html; charset=utf-8'],
    ['text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'text/html; charset=utf-8'],
    ['application/vnd.pypi.simple.latest+json', 'application/vnd.pypi.simple.v1+json'],
    ['application/vnd.pypi.simple.latest+html', 'application/vnd.pypi.simple.v1+html'],
    ['application/vnd.pypi.simple.v1+html', 'application/vnd.pypi.simple.v1+html'],
    ['application/vnd.pypi.simple.v1+json;q=0.5, text/html', 'text/html; charset=utf-8'],
    ['application/vnd.pypi.simple.v1+json, text/html', 'application/vnd.pypi.simple.v1+json'],
    ['application/vnd.pypi.simple.v1+json;q=0, */*', 'text/html; charset=utf-8'],
    ['application/*', 'application/vnd.pypi.simple.v1+html'],
    ['application/xml', 'text/html; charset=utf-8'],
    ['garbage', 'text/html; charset=utf-8'],
  ];
  it.each(cases)('Accept %j → %s', (accept, type) => {
    expect(negotiate(accept).contentType).toBe(type);
  });
});

describe('project lookup from a filename', () => {
  it('takes the first field of a wheel and tries sdist splits from the right', () => {
    expect(candidateProjects('my_pkg-1.0-py3-none-any.whl')).toEqual(['my-pkg']);
    expect(candidateProjects('my_pkg-1.0.tar.gz')).toEqual(['my-pkg']);
    expect(candidateProjects('old-style-name-1.0.tar.gz')).toEqual(['old-style-name', 'old-style', 'old']);
    expect(candidateProjects('nodash.tar.gz')).toEqual([]);
  });
});

describe('PEP 440', () => {
  it('orders and normalizes versions', () => {
    const sorted = ['1.10', '1.0', '2!0.1', '1.0.post1', '1.0a1', '1.9', '1.0.dev0', '1.0+local.7'].sort(compareVersions);
    expect(sorted).toEqual(['1.0.dev0', '1.0a1', '1.0', '1.0+local.7', '1.0.post1', '1.9', '1.10', '2!0.1']);
    expect(normalizeVersion('1.0-RC1')).toBe('1.0rc1');
    expect(normalizeVersion('1.0+Ubuntu-1')).toBe('1.0+ubuntu.1');
    expect(normalizeVersion('not a version')).toBeNull();
    expect(compareVersions('legacy-junk', '0.1')).toBeLessThan(0);
  });
});

describe('page cache', () => {
  it('renders once per version and evicts the least recently used', () => {
    const cache = new PageCache(2);
    let renders = 0;
    const render = (s: string) => () => (renders++, s);
    expect(cache.obtain('a', 'v1', render('A1'))?.body.toString()).toBe('A1');
    expect(cache.obtain('a', 'v1', render('A1'))?.body.toString()).toBe('A1');
    expect(renders).toBe(1);
    expect(cache.obtain('a', 'v2', render('A2'))?.body.toString()).toBe('A2');
    cache.obtain('b', 'v1', render('B'));
    cache.obtain('a', 'v2', render('A2'));
    cache.obtain('c', 'v1', render('C'));
    expect(cache.size).toBe(2);
    renders = 0;
    cache.obtain('a', 'v2', render('A2'));
    cache.obtain('b', 'v1', render('B'));
    expect(renders).toBe(1);
    expect(cache.obtain('x', 'v1', () => null)).toBeNull();
  });

  it('keeps PEP 700 upload times at microsecond precision', () => {
    expect(pep700Time('2024-05-06T07:08:09.123Z')).toBe('2024-05-06T07:08:09.123000Z');
    expect(pep700Time('2024-05-06T07:08:09Z')).toBe('2024-05-06T07:08:09.000000Z');
    expect(pep700Time('2024-05-06T07:08:09.123456Z')).toBe('2024-05-06T07:08:09.123456Z');
  });
});
