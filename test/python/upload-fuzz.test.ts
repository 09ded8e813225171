/**
 * Property: whatever bytes a client sends as an upload form, one running velodex answers, and
 * answers 200 or a 4xx with a JSON reason, never a 5xx and never not at all; and no part of a
 * refused file ever becomes visible. The forms start from a valid twine-shaped upload and are
 * broken by fast-check: random boundaries (or a header boundary that is not the body's, or none),
 * dropped CRLFs, truncation at any offset, header garbage in a part, inserted bytes, a second
 * content part, floods of fields.
 */
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.js';
import { basicAuth, defaultToken, startVelodex, type Velodex } from '../support/velodex.js';
import { uploadEntries, type FormField, type FormFile } from './fixtures/form.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';
import { storeState } from './fixtures/store.js';

/** No answer within this long is a hang (not a speed assertion: a good answer takes milliseconds). */
const REQUEST_TIMEOUT_MS = 30_000;
/** Two shared cores: enough runs to cover the shapes, few enough to keep the suite quick. */
const NUM_RUNS = 150;

let server: Velodex;
let token: string;
let fuzz: BuiltProject;
let wheelSha256: string;

beforeAll(async () => {
  fuzz = await buildProject('fuzz', '1.0');
  wheelSha256 = createHash('sha256').update(readFileSync(fuzz.wheel)).digest('hex');
  server = await startVelodex();
  token = defaultToken(server);
});

afterAll(async () => {
  await server?.stop();
  if (server) rmSync(server.dataDir, { recursive: true, force: true });
});

/** Characters RFC 2046 allows in a boundary (without the space, which may not end it). */
const BOUNDARY_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=?";

type ContentTypeShape = 'matching' | 'quoted' | 'other-boundary' | 'no-boundary';

interface BrokenForm {
  boundary: string;
  contentType: ContentTypeShape;
  extraFields: number;
  duplicateContent: boolean;
  /** [part index, header line] inserted after that part's Content-Disposition. */
  garbage: [number, string] | null;
  /** Byte-level damage, applied in order; positions are fractions of the current length. */
  damage: Damage[];
}

type Damage = { kind: 'truncate'; at: number } | { kind: 'drop-crlf'; nth: number } | { kind: 'insert'; at: number; bytes: Uint8Array };

const fraction = fc.double({ min: 0, max: 1, noNaN: true });

const damage: fc.Arbitrary<Damage> = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fraction }),
  fc.record({ kind: fc.constant('drop-crlf' as const), nth: fc.nat({ max: 40 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fraction, bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }) }),
);

const brokenForm: fc.Arbitrary<BrokenForm> = fc.record({
  boundary: fc.string({ unit: fc.constantFrom(...BOUNDARY_CHARS), minLength: 1, maxLength: 70 }),
  contentType: fc.constantFrom<ContentTypeShape>('matching', 'matching', 'quoted', 'other-boundary', 'no-boundary'),
  extraFields: fc.oneof({ arbitrary: fc.constant(0), weight: 6 }, { arbitrary: fc.integer({ min: 1, max: 3000 }), weight: 2 }, { arbitrary: fc.integer({ min: 10_001, max: 10_200 }), weight: 1 }),
  duplicateContent: fc.boolean(),
  garbage: fc.option(fc.tuple(fc.nat({ max: 20 }), fc.string({ maxLength: 120 })), { freq: 3 }),
  damage: fc.array(damage, { maxLength: 3 }),
});

function part(boundary: string, disposition: string, body: Buffer, garbage: string | null): Buffer {
  const headers = [`Content-Disposition: form-data; ${disposition}`, ...(garbage === null ? [] : [garbage])];
  return Buffer.concat([Buffer.from(`--${boundary}\r\n${headers.join('\r\n')}\r\n\r\n`), body, Buffer.from('\r\n')]);
}

function render(form: BrokenForm): { body: Buffer; contentType: string } {
  const { fields, file } = uploadEntries(fuzz.wheel, Array.from({ length: form.extraFields }, (_, i): FormField => ['classifiers', `Topic :: ${i}`]));
  const entries: (FormField | FormFile)[] = [...fields, file, ...(form.duplicateContent ? [file] : [])];
  const parts = entries.map((e, i) => {
    const garbage = form.garbage && form.garbage[0] === i ? form.garbage[1] : null;
    return Array.isArray(e)
      ? part(form.boundary, `name="${e[0]}"`, Buffer.from(e[1]), garbage)
      : part(form.boundary, `name="${e.name}"; filename="${e.filename}"`, e.data, garbage ?? 'Content-Type: application/octet-stream');
  });
  let body: Buffer = Buffer.concat([...parts, Buffer.from(`--${form.boundary}--\r\n`)]);
  for (const d of form.damage) body = apply(body, d);
  const contentType = {
    matching: `multipart/form-data; boundary=${form.boundary}`,
    quoted: `multipart/form-data; boundary="${form.boundary}"`,
    'other-boundary': `multipart/form-data; boundary=${form.boundary}x`,
    'no-boundary': 'multipart/form-data',
  }[form.contentType];
  return { body, contentType };
}

function apply(body: Buffer, d: Damage): Buffer {
  if (d.kind === 'truncate') return body.subarray(0, Math.floor(body.length * d.at));
  if (d.kind === 'insert') {
    const at = Math.floor(body.length * d.at);
    return Buffer.concat([body.subarray(0, at), d.bytes, body.subarray(at)]);
  }
  let at = -2;
  for (let i = 0; i <= d.nth; i++) {
    at = body.indexOf('\r\n', at + 2);
    if (at === -1) return body;
  }
  return Buffer.concat([body.subarray(0, at), body.subarray(at + 2)]);
}

describe('the upload form parser against broken forms', () => {
  it('answers every form with 200 or a 4xx with a reason, and shows nothing partial', async () => {
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(brokenForm, async (form) => {
        const { body, contentType } = render(form);
        const res = await rawRequest(server.url, '/root/hosted/', 'POST', { 'content-type': contentType, authorization: basicAuth(token) }, { body, timeoutMs: REQUEST_TIMEOUT_MS });
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
        const doc = JSON.parse(res.body) as { message?: unknown; sha256?: unknown };
        if (res.status === 200) {
          // Only the intact wheel can pass: the form's sha256_digest and the wheel's RECORD see to that.
          expect(doc.sha256).toBe(wheelSha256);
        } else {
          expect(res.status, res.body).toBeGreaterThanOrEqual(400);
          expect(res.status, res.body).toBeLessThan(500);
          expect(typeof doc.message, res.body).toBe('string');
        }
      }),
      { numRuns: NUM_RUNS },
    );
    // Both kinds of answer were exercised.
    expect(seen.get(200) ?? 0).toBeGreaterThan(0);
    expect(seen.get(400) ?? 0).toBeGreaterThan(0);

    for (let i = 0; i < 50 && (await storeState(server.dataDir)).staged.length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    const state = await storeState(server.dataDir);
    expect(state.staged).toEqual([]);
    // Nothing but the one intact wheel (and its metadata sibling) was ever stored or listed.
    expect(state.projects.filter((p) => p !== 'fuzz')).toEqual([]);
    const page = await fetch(`${server.url}/root/hosted/simple/fuzz/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
    const files = ((await page.json()) as { files: { filename: string; hashes: { sha256: string } }[] }).files;
    expect(files.map((f) => [f.filename, f.hashes.sha256])).toEqual([[fuzz.wheelFilename, wheelSha256]]);
    expect(state.blobs.length).toBe(2);
    expect(state.blobs).toContain(wheelSha256);

    const errors = server
      .logs()
      .split('\n')
      .filter((line) => /"level":(50|60)/.test(line));
    expect(errors).toEqual([]);
  });
});
