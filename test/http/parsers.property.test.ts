/**
 * Property-based tests (fast-check) of the parsers that take client bytes: the safe request-path
 * parser every route goes through, and the `Range` header parser of file downloads. Generators
 * mix arbitrary text with the pieces an attacker would use, so both the happy path and the edges
 * are hit in a modest number of runs.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HttpError } from '../../registry/src/http/errors.js';
import { parseSafePath } from '../../registry/src/http/path.js';
import { parseRange } from '../../registry/src/http/range.js';

const RUNS = { numRuns: 300 };

/** What a path segment is made of: plain text plus separators, dots, escapes and control bytes. */
const segmentPiece = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.constantFrom('.', '..', '/', '\\', '\0', '%', '%2e', '%2E', '%2f', '%2F', '%5c', '%5C', '%00', '%25', '%c0%ae', '%zz', '?', '#', ';', '~', 'é', '%C3%A9'),
);
const rawSegment = fc.array(segmentPiece, { minLength: 0, maxLength: 4 }).map((parts) => parts.join(''));
const rawPath = fc
  .tuple(fc.array(rawSegment, { maxLength: 6 }), fc.boolean())
  .map(([segs, slash]) => `/${segs.join('/')}${slash ? '/' : ''}`);

/** A segment a safe path may hold (decoded): anything but separators, NUL and the dot names. */
const safeSegment = fc
  .string({ minLength: 1, maxLength: 12, unit: 'grapheme' })
  .filter((s) => s !== '.' && s !== '..' && !/[/\\\0]/.test(s));

function parseOrError(raw: string): ReturnType<typeof parseSafePath> | HttpError {
  try {
    return parseSafePath(raw);
  } catch (err) {
    // Anything other than a 400 HttpError is a bug the property reports.
    if (err instanceof HttpError && err.status === 400) return err;
    throw err;
  }
}

describe('parseSafePath', () => {
  it('never throws anything but a 400, and never yields an unsafe segment', () => {
    fc.assert(
      fc.property(rawPath, fc.option(fc.string({ maxLength: 8 }), { nil: undefined }), (path, query) => {
        const parsed = parseOrError(query === undefined ? path : `${path}?${query}`);
        if (parsed instanceof HttpError) return;
        for (const seg of parsed.segments) {
          expect(seg).not.toBe('');
          expect(seg).not.toBe('.');
          expect(seg).not.toBe('..');
          expect(seg).not.toMatch(/[/\\\0]/);
        }
      }),
      RUNS,
    );
  });

  it('refuses every path with a dot segment, an encoded slash, backslash, dot or NUL, a raw backslash or NUL', () => {
    const unsafe = fc.constantFrom('..', '.', '%2e%2e', '%2E', 'a%2fb', 'a%2Fb', 'a%5cb', '%5C', 'a%00', 'a\\b', 'a\0b', '%2e');
    fc.assert(
      fc.property(fc.array(safeSegment, { maxLength: 3 }), unsafe, fc.array(safeSegment, { maxLength: 3 }), fc.boolean(), (before, bad, after, slash) => {
        const raw = `/${[...before.map(encodeURIComponent), bad, ...after.map(encodeURIComponent)].join('/')}${slash ? '/' : ''}`;
        const parsed = parseOrError(raw);
        expect(parsed).toBeInstanceOf(HttpError);
      }),
      RUNS,
    );
  });

  it('gives back the segments, trailing slash and query of any safe path it was given', () => {
    fc.assert(
      fc.property(fc.array(safeSegment, { maxLength: 6 }), fc.boolean(), fc.string({ maxLength: 10 }), (segments, slash, query) => {
        const raw = `/${segments.map(encodeURIComponent).join('/')}${slash && segments.length > 0 ? '/' : ''}`;
        const q = encodeURIComponent(query);
        const parsed = parseOrError(q ? `${raw}?${q}` : raw);
        expect(parsed).not.toBeInstanceOf(HttpError);
        expect(parsed).toEqual({ segments, trailingSlash: slash && segments.length > 0, query: q });
      }),
      RUNS,
    );
  });
});

describe('parseRange', () => {
  /** Range headers as clients (and fuzzers) send them. */
  const num = fc.oneof(fc.nat({ max: 5000 }).map(String), fc.constantFrom('', '0', '00', '-1', '1e3', '9'.repeat(30), ' 5 '));
  const header = fc.oneof(
    fc.tuple(fc.constantFrom('bytes=', 'Bytes =', 'bytes= ', 'items=', 'bytes'), num, fc.constantFrom('-', '--', ''), num).map((p) => p.join('')),
    fc.tuple(num, num, num, num).map(([a, b, c, d]) => `bytes=${a}-${b},${c}-${d}`),
    fc.string({ maxLength: 20 }),
    fc.constant(undefined),
  );

  it('never throws, and a partial answer is a non-empty range inside [0, size)', () => {
    fc.assert(
      fc.property(header, fc.nat({ max: 4000 }), (h, size) => {
        const answer = parseRange(h, size);
        if (answer.kind !== 'partial') return;
        expect(Number.isSafeInteger(answer.start)).toBe(true);
        expect(Number.isSafeInteger(answer.end)).toBe(true);
        expect(answer.start).toBeGreaterThanOrEqual(0);
        expect(answer.start).toBeLessThanOrEqual(answer.end);
        expect(answer.end).toBeLessThan(size);
      }),
      RUNS,
    );
  });

  it('serves exactly the bytes a well-formed satisfiable single range names', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4000 }), fc.nat(), fc.nat(), (size, a, b) => {
        const start = a % size;
        const end = start + (b % (size - start));
        expect(parseRange(`bytes=${start}-${end}`, size)).toEqual({ kind: 'partial', start, end });
        expect(parseRange(`bytes=${start}-`, size)).toEqual({ kind: 'partial', start, end: size - 1 });
        expect(parseRange(`bytes=-${end - start + 1}`, size)).toEqual({ kind: 'partial', start: size - (end - start + 1), end: size - 1 });
        expect(parseRange(`bytes=${size + (b % 10)}-`, size)).toEqual({ kind: 'unsatisfiable' });
      }),
      RUNS,
    );
  });
});
