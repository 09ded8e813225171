/**
 * Property-based tests of the manifest PUT checks. The pure checker (manifest-check.ts) gets
 * random JSON and non-JSON bodies, random manifests with random media types and descriptors with
 * bad digests, under random Content-Types: it either accepts with one of the four manifest media
 * types or refuses with a 4xx OCI error, nothing else. A real server then gets fewer random pushes
 * of the same bytes: every answer is 201 or a 4xx OCI error, and the media type served for the
 * digest is the one of its first accepted push, whatever came after.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS, OciError } from '../../registry/src/oci/model/errors.js';
import { checkManifest, isManifestMediaType } from '../../registry/src/oci/model/manifest-check.js';
import { rawRequest } from '../support/raw-http.js';
import { basicAuth, defaultToken, startVelodex, type Velodex } from '../support/velodex.js';
import { OCI_INDEX, OCI_MANIFEST, Registry, sha256 } from './api-support.js';

const MANIFEST_TYPES = [OCI_MANIFEST, OCI_INDEX, 'application/vnd.docker.distribution.manifest.v2+json', 'application/vnd.docker.distribution.manifest.list.v2+json'];
const OTHER_TYPES = [
  'application/x-www-form-urlencoded',
  'application/octet-stream',
  'application/json',
  'text/plain',
  'application/vnd.oci.artifact.manifest.v1+json',
  'application/vnd.oci.image.config.v1+json',
  '',
];

const mediaType = fc.oneof(fc.constantFrom(...MANIFEST_TYPES, ...OTHER_TYPES), fc.string());
/** A Content-Type header: absent, a type with odd case or parameters, or noise. */
const contentType = fc.option(
  fc.oneof(
    mediaType,
    mediaType.map((t) => `${t.toUpperCase()}; charset=utf-8`),
    mediaType.map((t) => ` ${t} ;q=1`),
  ),
  { nil: undefined },
);

const hex64 = fc.stringMatching(/^[a-f0-9]{64}$/);
const goodDigest = hex64.map((h) => `sha256:${h}`);
const badDigest = fc.oneof(
  fc.string(),
  hex64.map((h) => `sha256:${h.toUpperCase()}`),
  hex64.map((h) => `sha256:${h.slice(1)}`),
  hex64.map((h) => `SHA256:${h}`),
  hex64.map((h) => `sha256:${h}\n`),
  fc.constant('sha256:'),
  fc.constant(':abc'),
  fc.integer(),
  fc.constant(null),
);
const size = fc.oneof(fc.nat(), fc.integer({ min: -5, max: -1 }), fc.double(), fc.string(), fc.constant(Number.MAX_SAFE_INTEGER + 2));
const descriptor = fc.record(
  { mediaType: fc.oneof(mediaType, fc.integer()), digest: fc.oneof(goodDigest, goodDigest, badDigest), size, urls: fc.array(fc.webUrl(), { maxLength: 2 }) },
  { requiredKeys: ['digest'] },
);
const manifestDoc = fc.record(
  {
    schemaVersion: fc.oneof(fc.constant(2), fc.constant(2), fc.integer({ min: -1, max: 3 }), fc.string()),
    mediaType: fc.oneof(mediaType, fc.integer()),
    config: fc.oneof(descriptor, fc.jsonValue()),
    layers: fc.oneof(fc.array(descriptor, { maxLength: 4 }), fc.jsonValue()),
    manifests: fc.oneof(fc.array(descriptor, { maxLength: 4 }), fc.jsonValue()),
    subject: fc.oneof(descriptor, fc.jsonValue()),
    annotations: fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }),
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  manifestDoc.map((d) => Buffer.from(JSON.stringify(d))),
  manifestDoc.map((d) => Buffer.from(JSON.stringify(d, null, 2))),
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
  fc.string().map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
);

/** The outcome the protocol allows: accepted with a manifest media type, or a 4xx OCI error. */
function outcome(bytes: Buffer, type: string | undefined): { ok: true; mediaType: string } | { ok: false; status: number; code: string } {
  try {
    return { ok: true, mediaType: checkManifest(bytes, type).mediaType };
  } catch (err) {
    if (!(err instanceof OciError)) throw err;
    return { ok: false, status: err.status, code: err.code };
  }
}

describe('checkManifest (pure)', () => {
  it('accepts with a manifest media type or refuses with 400 MANIFEST_INVALID, never anything else', () => {
    fc.assert(
      fc.property(body, contentType, (bytes, type) => {
        const got = outcome(bytes, type);
        if (got.ok) expect(isManifestMediaType(got.mediaType)).toBe(true);
        else expect(got).toMatchObject({ status: 400, code: 'MANIFEST_INVALID' });
      }),
      { numRuns: 2000 },
    );
  });

  it('takes a manifest Content-Type, else the body mediaType; refuses a disagreement', () => {
    fc.assert(
      fc.property(fc.constantFrom(...MANIFEST_TYPES, ...OTHER_TYPES), fc.option(fc.constantFrom(...MANIFEST_TYPES, ...OTHER_TYPES), { nil: undefined }), goodDigest, (header, bodyType, digest) => {
        const d = { mediaType: 'x', digest, size: 1 };
        const doc = { schemaVersion: 2, mediaType: bodyType, config: d, layers: [d], manifests: [d] };
        const got = outcome(Buffer.from(JSON.stringify(doc)), header);
        const headerIsManifest = MANIFEST_TYPES.includes(header);
        const bodyIsManifest = bodyType !== undefined && MANIFEST_TYPES.includes(bodyType);
        if (headerIsManifest && bodyType !== undefined && bodyType !== header) expect(got.ok).toBe(false);
        else if (headerIsManifest && (bodyType !== undefined || header.includes('vnd.oci.'))) expect(got).toEqual({ ok: true, mediaType: header });
        else if (!headerIsManifest && bodyIsManifest) expect(got).toEqual({ ok: true, mediaType: bodyType });
        else expect(got.ok).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('refuses a descriptor with a bad digest anywhere it is checked', () => {
    fc.assert(
      fc.property(badDigest, fc.constantFrom('config', 'layers', 'manifests', 'subject'), (digest, where) => {
        const bad = { mediaType: 'x', digest, size: 1 };
        const ok = { mediaType: 'x', digest: `sha256:${'a'.repeat(64)}`, size: 1 };
        const index = where === 'manifests';
        const doc: Record<string, unknown> = index
          ? { schemaVersion: 2, mediaType: OCI_INDEX, manifests: [bad] }
          : { schemaVersion: 2, mediaType: OCI_MANIFEST, config: where === 'config' ? bad : ok, layers: where === 'layers' ? [ok, bad] : [ok] };
        if (where === 'subject') doc.subject = bad;
        const got = outcome(Buffer.from(JSON.stringify(doc)), undefined);
        // `sha512:...`-like digests of a valid grammar pass the shape check (and are then never stored).
        if (typeof digest === 'string' && /^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/.test(digest) && !digest.startsWith('sha256:')) return;
        expect(got).toMatchObject({ ok: false, status: 400, code: 'MANIFEST_INVALID' });
      }),
      { numRuns: 500 },
    );
  });
});

describe('manifest PUT on a real server', () => {
  let server: Velodex;
  let reg: Registry;
  let token: string;
  let configHex: string;
  const config = '{"os":"linux"}';

  beforeAll(async () => {
    server = await startVelodex();
    token = defaultToken(server);
    reg = new Registry(server.url, basicAuth(token));
    configHex = await reg.pushBlob('root/oci/prop', config);
  });

  afterAll(async () => {
    await server?.stop();
  });

  const put = (repo: string, tag: string, bytes: Buffer, type: string | undefined) => {
    const headers: Record<string, string> = { authorization: basicAuth(token), 'content-length': String(bytes.length) };
    if (type !== undefined) headers['content-type'] = type;
    return rawRequest(server.url, `/v2/root/oci/${repo}/manifests/${tag}`, 'PUT', headers, { body: bytes });
  };

  function expectProtocolAnswer(res: { status: number; body: string }): void {
    if (res.status === 201) return;
    expect(res.status, res.body).toBeGreaterThanOrEqual(400);
    expect(res.status, res.body).toBeLessThan(500);
    const code = (JSON.parse(res.body) as { errors: { code: string }[] }).errors[0]?.code ?? '';
    expect(Object.keys(ERROR_STATUS)).toContain(code);
  }

  it('answers random bodies under random Content-Types with 201 or a 4xx OCI error', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(body, contentType, async (bytes, type) => {
        // Header values must be sendable: Node refuses control characters before they reach the server.
        fc.pre(type === undefined || /^[\x20-\x7e]*$/.test(type));
        expectProtocolAnswer(await put('prop', `random${n++}`, bytes, type));
      }),
      { numRuns: 60 },
    );
  });

  it("serves a digest with its first accepted push's media type, whatever is pushed after", async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.option(fc.constantFrom(...MANIFEST_TYPES, ...OTHER_TYPES), { nil: undefined }), { minLength: 1, maxLength: 6 }), async (types) => {
        const repo = `fixed${n++}`;
        // Valid as an image manifest and as an index, without a mediaType: only Content-Type decides.
        const doc = { schemaVersion: 2, config: { mediaType: 'x', digest: `sha256:${configHex}`, size: config.length }, manifests: [], n };
        const bytes = Buffer.from(JSON.stringify(doc));
        let first: string | undefined;
        for (const [i, type] of types.entries()) {
          const res = await put(repo, `t${i}`, bytes, type);
          expectProtocolAnswer(res);
          if (res.status === 201) first ??= type;
          const get = await rawRequest(server.url, `/v2/root/oci/${repo}/manifests/sha256:${sha256(bytes)}`);
          if (first === undefined) expect(get.status).toBe(404);
          else expect(get.headers['content-type']).toBe(first);
        }
      }),
      { numRuns: 20 },
    );
  });
});
