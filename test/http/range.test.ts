/** The one `Range` parser of file downloads (both ecosystems). */
import { describe, expect, it } from 'vitest';
import { parseRange } from '../../registry/src/http/range.js';

describe('Range parsing', () => {
  it.each([
    [undefined, 10, { kind: 'full' }],
    ['bytes=0-3', 10, { kind: 'partial', start: 0, end: 3 }],
    ['bytes=5-', 10, { kind: 'partial', start: 5, end: 9 }],
    ['bytes=-4', 10, { kind: 'partial', start: 6, end: 9 }],
    ['bytes=-40', 10, { kind: 'partial', start: 0, end: 9 }],
    ['bytes=2-100', 10, { kind: 'partial', start: 2, end: 9 }],
    ['bytes=10-', 10, { kind: 'unsatisfiable' }],
    ['bytes=-0', 10, { kind: 'unsatisfiable' }],
    ['bytes=0-1,4-5', 10, { kind: 'full' }],
    // A malformed or backwards bytes range is refused (416), as on /v2/; another unit is ignored.
    ['bytes=5-2', 10, { kind: 'unsatisfiable' }],
    ['bytes=abc', 10, { kind: 'unsatisfiable' }],
    ['bytes=-', 10, { kind: 'unsatisfiable' }],
    ['items=0-1', 10, { kind: 'full' }],
    ['bytes=0-0', 0, { kind: 'unsatisfiable' }],
  ] as const)('%s of %d bytes', (header, size, answer) => {
    expect(parseRange(header, size)).toEqual(answer);
  });
});
