/**
 * What a manifest PUT may store, decided from the body and its `Content-Type` alone (no I/O):
 * the media type the manifest will be served with, the blobs the target index must already hold,
 * and the declared subject. Anything else is 400 MANIFEST_INVALID, as in the distribution
 * registry:
 *
 * - the body is a JSON object with `schemaVersion: 2`;
 * - the media type is one of the four manifest types below. It is the `Content-Type` when that is
 *   one (a body `mediaType` must then agree), else the body's `mediaType` (curl sends
 *   `application/x-www-form-urlencoded`; some tools send `application/octet-stream`). A type that
 *   is neither would be served to every later pull, and clients refuse such images;
 * - the Docker types require the body's `mediaType` (their schemas do), the OCI types allow it
 *   absent;
 * - an image has a `config` and may have `layers`, an index has `manifests`; their descriptors
 *   (and a `subject`'s) have a string `mediaType`, a digest of the image-spec grammar and a
 *   non-negative integer `size`.
 *
 * The OCI artifact manifest (`application/vnd.oci.artifact.manifest.v1+json`) is not accepted:
 * image-spec 1.1 dropped it for image manifests with `artifactType`, which is what oras and the
 * conformance suites push, and the distribution registry refuses it too.
 */
import { OciError } from './errors.js';

/** The largest manifest stored, pushed or pulled through (the distribution registry's limit). */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;

export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
export const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
export const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';
export const DOCKER_MANIFEST_LIST = 'application/vnd.docker.distribution.manifest.list.v2+json';

type Kind = 'image' | 'index';

const KINDS: ReadonlyMap<string, { kind: Kind; bodyTypeRequired: boolean }> = new Map([
  [OCI_MANIFEST, { kind: 'image', bodyTypeRequired: false }],
  [OCI_INDEX, { kind: 'index', bodyTypeRequired: false }],
  [DOCKER_MANIFEST, { kind: 'image', bodyTypeRequired: true }],
  [DOCKER_MANIFEST_LIST, { kind: 'index', bodyTypeRequired: true }],
]);

/**
 * Layers clients fetch from their `urls` instead of the registry (image-spec's deprecated
 * non-distributable layers, Docker's foreign layers): with URLs they need not be pushed.
 */
const EXTERNAL_LAYER_TYPES = new Set([
  'application/vnd.oci.image.layer.nondistributable.v1.tar',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+zstd',
  'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
]);

/** image-spec's digest grammar; sha256's encoded part is exactly 64 lowercase hex. */
const DIGEST = /^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;
const SHA256 = /^sha256:([a-f0-9]{64})$/;

export type Json = Record<string, unknown>;

export interface CheckedManifest {
  mediaType: string;
  doc: Json;
  /** Digests (`algorithm:encoded`) of the blobs the target index must hold: an image's config and layers. */
  blobs: string[];
  /**
   * Hex of every sha256 digest the manifest's descriptors name except its subject: an image's
   * config and layers, an index's child manifests (`referencedHexes`). The target repository
   * holds those it can see.
   */
  references: string[];
  /** The declared subject, when it is a sha256 digest (the only kind the referrers API can be asked for). */
  subject?: { digest: string; hex: string };
}

export function isManifestMediaType(value: string): boolean {
  return KINDS.has(value);
}

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function invalid(message: string): OciError {
  return new OciError('MANIFEST_INVALID', message);
}

/** The media type of a `Content-Type` header, without parameters, lowercased (RFC 9110). */
function headerType(contentType: string | undefined): string | undefined {
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  return type === '' ? undefined : type;
}

function chooseMediaType(contentType: string | undefined, doc: Json): string {
  const bodyType = doc.mediaType;
  if (bodyType !== undefined && typeof bodyType !== 'string') throw invalid('the manifest\'s "mediaType" is not a string');
  const header = headerType(contentType);
  if (header !== undefined && isManifestMediaType(header)) {
    if (bodyType !== undefined && bodyType !== header) {
      throw invalid(`the Content-Type ${header} disagrees with the manifest's mediaType ${bodyType}`);
    }
    if (bodyType === undefined && KINDS.get(header)?.bodyTypeRequired) throw invalid(`a ${header} must declare its "mediaType"`);
    return header;
  }
  if (bodyType !== undefined && isManifestMediaType(bodyType)) return bodyType;
  const named = bodyType === undefined ? 'names no mediaType' : `names the mediaType ${bodyType}`;
  throw invalid(
    `the Content-Type ${header ?? '(none)'} is not a manifest media type and the body ${named}; ` +
      `use one of ${[...KINDS.keys()].join(', ')}`,
  );
}

/** Checks a descriptor's shape; returns its digest. */
function descriptorDigest(value: unknown, where: string): string {
  if (!isObject(value)) throw invalid(`${where} is not a descriptor object`);
  if (typeof value.mediaType !== 'string') throw invalid(`${where} has no string "mediaType"`);
  const digest = value.digest;
  if (typeof digest !== 'string' || !DIGEST.test(digest)) throw invalid(`${where} has no valid "digest"`);
  if (digest.startsWith('sha256:') && !SHA256.test(digest)) throw invalid(`${where} has a malformed sha256 digest`);
  const size = value.size;
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) throw invalid(`${where} has no non-negative integer "size"`);
  return digest;
}

/** An array of descriptors; when not `required`, absent or null is empty (an image without layers). */
function descriptors(doc: Json, field: string, required: boolean): unknown[] {
  const value = doc[field];
  if (!required && (value === undefined || value === null)) return [];
  if (!Array.isArray(value)) throw invalid(`"${field}" is not an array`);
  return value;
}

function isExternalLayer(layer: unknown): boolean {
  return (
    isObject(layer) &&
    typeof layer.mediaType === 'string' &&
    EXTERNAL_LAYER_TYPES.has(layer.mediaType) &&
    Array.isArray(layer.urls) &&
    layer.urls.length > 0
  );
}

function parseJson(body: Buffer): Json {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    throw invalid('the manifest is not valid UTF-8 JSON');
  }
  if (!isObject(doc)) throw invalid('the manifest is not a JSON object');
  return doc;
}

export function checkManifest(body: Buffer, contentType: string | undefined): CheckedManifest {
  const doc = parseJson(body);
  if (doc.schemaVersion !== 2) throw invalid('the manifest\'s "schemaVersion" is not 2');
  const mediaType = chooseMediaType(contentType, doc);
  const blobs: string[] = [];
  if (KINDS.get(mediaType)?.kind === 'image') {
    blobs.push(descriptorDigest(doc.config, '"config"'));
    descriptors(doc, 'layers', false).forEach((layer, i) => {
      const digest = descriptorDigest(layer, `layer ${i}`);
      if (!isExternalLayer(layer)) blobs.push(digest);
    });
  } else {
    // An index may list manifests that are not pushed (yet, or for other platforms).
    descriptors(doc, 'manifests', true).forEach((m, i) => descriptorDigest(m, `manifest ${i}`));
  }
  const checked: CheckedManifest = { mediaType, doc, blobs: [...new Set(blobs)], references: referencedHexes(doc) };
  // The subject may be absent from the registry (referrers spec): its shape is checked, not its presence.
  if (doc.subject !== undefined && doc.subject !== null) {
    const digest = descriptorDigest(doc.subject, '"subject"');
    const hex = SHA256.exec(digest)?.[1];
    if (hex) checked.subject = { digest, hex };
  }
  return checked;
}

/**
 * The sha256 hexes a manifest's descriptors name, the subject left out: `config`, `layers` and
 * `manifests`, whichever the document has. Lenient (stored manifests were checked when they were
 * pushed): what is not a sha256 descriptor names nothing.
 */
export function referencedHexes(doc: Json): string[] {
  const out = new Set<string>();
  const add = (d: unknown) => {
    const hex = isObject(d) && typeof d.digest === 'string' ? SHA256.exec(d.digest)?.[1] : undefined;
    if (hex) out.add(hex);
  };
  add(doc.config);
  for (const field of ['layers', 'manifests']) {
    const list = doc[field];
    if (Array.isArray(list)) list.forEach(add);
  }
  return [...out];
}

/** `referencedHexes` of stored manifest bytes; none when they are not a JSON object. */
export function referencedHexesOf(bytes: Buffer): string[] {
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch {
    return [];
  }
  return isObject(doc) ? referencedHexes(doc) : [];
}
