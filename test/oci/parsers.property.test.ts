/**
 * Property-based checks of the `/v2/` parsers that take client bytes: names, references and
 * digests, the URL split, the `Content-Range` of an upload chunk, and the `n`/`last` paging
 * query. Each parser is pure; the properties say what it may return for any input, and that it
 * fails only with the protocol error it is meant to raise.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OciError } from '../../registry/src/oci/model/errors.js';
import { parseOciUrl } from '../../registry/src/oci/handlers/url.js';
import { checkName, MAX_NAME_LENGTH, parseDigest, parseReference } from '../../registry/src/oci/model/names.js';
import { byCodeUnit, pageOf, parsePageQuery } from '../../registry/src/oci/model/pages.js';
import { parseContentRange } from '../../registry/src/oci/handlers/content-range.js';

const RUNS = { numRuns: 300 };

/** The spec's grammars, written out here independently of the server's. */
const SPEC_TAG = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;
const SPEC_COMPONENT = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$/;
const SPEC_DIGEST = /^sha256:[a-f0-9]{64}$/;

/** Runs `fn`; an error other than an OciError with one of `codes` fails the property. */
function outcome<T>(fn: () => T, codes: string[]): T | OciError {
  try {
    return fn();
  } catch (err) {
    if (err instanceof OciError && codes.includes(err.code)) return err;
    throw err;
  }
}

const text = fc.string({ unit: 'binary', maxLength: 80 });
const component = fc.stringMatching(/^[a-z0-9]{1,8}(?:(?:\.|_|__|-{1,3})[a-z0-9]{1,8}){0,2}$/);

describe('names', () => {
  it('accepts every name of the grammar up to 255 characters', () => {
    fc.assert(
      fc.property(fc.array(component, { minLength: 1, maxLength: 6 }), (segments) => {
        fc.pre(segments.join('/').length <= MAX_NAME_LENGTH);
        expect(() => checkName(segments)).not.toThrow();
      }),
      RUNS,
    );
  });

  it('refuses with NAME_INVALID only, and exactly what the grammar refuses', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(component, text), { minLength: 1, maxLength: 4 }), (segments) => {
        const result = outcome(() => checkName(segments), ['NAME_INVALID']);
        const valid = segments.join('/').length <= MAX_NAME_LENGTH && segments.every((s) => SPEC_COMPONENT.test(s));
        expect(result instanceof OciError).toBe(!valid);
      }),
      RUNS,
    );
  });

  it('refuses dot segments, uppercase and over-long names', () => {
    fc.assert(
      fc.property(fc.array(component, { minLength: 1, maxLength: 3 }), fc.nat({ max: 3 }), (segments, at) => {
        const i = at % (segments.length + 1);
        for (const bad of ['..', '.', 'App', `${segments[0] ?? 'a'}X`]) {
          const withBad = [...segments.slice(0, i), bad, ...segments.slice(i)];
          expect(() => checkName(withBad)).toThrow(OciError);
        }
        const long = [...segments, 'a'.repeat(MAX_NAME_LENGTH)];
        expect(outcome(() => checkName(long), ['NAME_INVALID'])).toBeInstanceOf(OciError);
      }),
      RUNS,
    );
  });
});

describe('references and digests', () => {
  it('takes a reference without ":" as a tag exactly when it matches the spec pattern', () => {
    fc.assert(
      fc.property(fc.oneof(fc.stringMatching(SPEC_TAG), text.filter((s) => !s.includes(':'))), (value) => {
        const result = outcome(() => parseReference(value), ['TAG_INVALID']);
        if (SPEC_TAG.test(value)) expect(result).toEqual({ kind: 'tag', tag: value });
        else expect(result).toBeInstanceOf(OciError);
      }),
      RUNS,
    );
  });

  it('refuses tags of 129 characters and more', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z][a-z0-9]{128,200}$/), (value) => {
        expect(outcome(() => parseReference(value), ['TAG_INVALID'])).toBeInstanceOf(OciError);
      }),
      { numRuns: 50 },
    );
  });

  it('takes a digest exactly when it is sha256 with 64 lowercase hex characters', () => {
    const hex64 = fc.stringMatching(/^[a-f0-9]{64}$/);
    const digests = fc.oneof(
      hex64.map((h) => `sha256:${h}`),
      hex64.map((h) => `sha256:${h.toUpperCase()}`),
      hex64.map((h) => `sha512:${h}${h}`),
      fc.tuple(text, text).map(([a, b]) => `${a}:${b}`),
    );
    fc.assert(
      fc.property(digests, (value) => {
        const result = outcome(() => parseReference(value), ['DIGEST_INVALID']);
        if (SPEC_DIGEST.test(value)) expect(result).toEqual({ kind: 'digest', hex: value.slice(7) });
        else expect(result).toBeInstanceOf(OciError);
        expect(outcome(() => parseDigest(value), ['DIGEST_INVALID']) instanceof OciError).toBe(!SPEC_DIGEST.test(value));
      }),
      RUNS,
    );
  });
});

describe('URLs', () => {
  it('splits any path under /v2/ or refuses it with a name error, never climbing out', () => {
    const segment = fc.oneof(component, fc.constantFrom('..', '.', '%2e%2e', '%2F', '%00', 'blobs', 'uploads', 'manifests', 'tags', 'list', '_catalog'), text);
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 6 }), text, (segments, query) => {
        const url = `/v2/${segments.map((s) => s.replace(/[/?#]/g, '')).join('/')}?${query}`;
        const result = outcome(() => parseOciUrl(url), ['NAME_INVALID', 'NAME_UNKNOWN']);
        if (result instanceof OciError) return;
        if ('name' in result.action) {
          expect(result.action.name.length).toBeGreaterThan(0);
          for (const s of result.action.name) {
            expect(['.', '..']).not.toContain(s);
            expect(s).not.toMatch(/[/\\\0]/);
          }
        }
      }),
      RUNS,
    );
  });
});

describe('Content-Range of an upload chunk', () => {
  it('never throws; gives a range with start <= end in safe integers, or null', () => {
    fc.assert(
      fc.property(fc.oneof(text, fc.stringMatching(/^(bytes[ =])?\d{1,20}-\d{1,20}(\/(\d{1,20}|\*))?$/)), (header) => {
        const range = parseContentRange(header);
        if (range === null) return;
        expect(Number.isSafeInteger(range.start) && Number.isSafeInteger(range.end)).toBe(true);
        expect(range.start).toBeGreaterThanOrEqual(0);
        expect(range.end).toBeGreaterThanOrEqual(range.start);
      }),
      RUNS,
    );
  });

  it('reads back every well-formed range in the OCI and the HTTP form', () => {
    const offset = fc.integer({ min: 0, max: 999_999_999_999_999 });
    fc.assert(
      fc.property(offset, offset, fc.constantFrom('', 'bytes ', 'bytes='), fc.constantFrom('', '/*', '/123'), (a, b, prefix, total) => {
        const [start, end] = a <= b ? [a, b] : [b, a];
        expect(parseContentRange(`${prefix}${start}-${end}${total}`)).toEqual({ start, end });
        if (start !== end) expect(parseContentRange(`${prefix}${end}-${start}${total}`)).toBeNull();
      }),
      RUNS,
    );
  });
});

describe('n and last', () => {
  it('never throws; n is a non-negative safe integer exactly when given as digits', () => {
    fc.assert(
      fc.property(text, fc.option(text), (n, last) => {
        const query = new URLSearchParams();
        query.set('n', n);
        if (last !== null) query.set('last', last);
        const page = parsePageQuery(query);
        if (/^\d+$/.test(n)) {
          expect(Number.isSafeInteger(page.n)).toBe(true);
          expect(page.n).toBeGreaterThanOrEqual(0);
        } else expect(page.n).toBeUndefined();
        expect(page.last).toBe(last ?? undefined);
      }),
      RUNS,
    );
  });

  it('pages cover the sorted list in order, each at most n long, following next', () => {
    fc.assert(
      fc.property(fc.uniqueArray(text, { maxLength: 40 }), fc.integer({ min: 1, max: 10 }), fc.option(text), (entries, n, last) => {
        const sorted = [...entries].sort(byCodeUnit);
        const expected = last === null ? sorted : sorted.filter((e) => e > last);
        const seen: string[] = [];
        let cursor = last ?? undefined;
        for (;;) {
          const page = pageOf(sorted, { n, last: cursor });
          expect(page.entries.length).toBeLessThanOrEqual(n);
          seen.push(...page.entries);
          if (page.next === undefined) break;
          expect(page.next).toBe(page.entries.at(-1));
          cursor = page.next;
        }
        expect(seen).toEqual(expected);
      }),
      RUNS,
    );
  });
});
