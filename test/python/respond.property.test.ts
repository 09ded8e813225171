/**
 * Property-based test (fast-check) of the relative `Location` the Python handlers answer a
 * redirect with: resolved against the request URL, under any prefix a proxy adds, it names the
 * target.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { relativeLocation } from '../../registry/src/python/handlers/respond.js';

const RUNS = { numRuns: 300 };

describe('relativeLocation', () => {
  it('resolves, against the request URL under any prefix, to the target URL', () => {
    const seg = fc.constantFrom('simple', 'demo-pkg', 'Demo_Pkg', 'json', '1.0', 'a b', 'x');
    fc.assert(
      fc.property(
        fc.array(seg, { maxLength: 4 }),
        fc.boolean(),
        fc.array(seg, { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        fc.constantFrom('', '/prefix', '/a/b'),
        (from, fromSlash, to, toSlash, prefix) => {
          const path = (segs: string[], slash: boolean) => `${prefix}/root/idx/${segs.map(encodeURIComponent).join('/')}${slash && segs.length > 0 ? '/' : ''}`;
          const request = new URL(path(from, fromSlash), 'https://example.test');
          const location = relativeLocation(from, fromSlash && from.length > 0, to, toSlash);
          expect(new URL(location, request).pathname).toBe(path(to, toSlash));
        },
      ),
      RUNS,
    );
  });
});
