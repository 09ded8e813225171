/**
 * Manifests and image indexes: PUT stores the body byte-for-byte under its sha256 (so the digest a
 * client computed stays valid), records the media type, subject and referrer descriptor, then
 * points the tag at it. GET/HEAD resolve through the index's members, hosted first.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { authorizeWrite } from './access.js';
import { manifestLocation, type OciCall } from './context.js';
import { OciError } from './errors.js';
import type { Descriptor, ManifestRecord } from './meta.js';
import { parseReference, type Reference } from './names.js';

export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
export const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';

/** A read with an impossible tag is simply a manifest nobody can serve. */
function readReference(value: string): Reference {
  try {
    return parseReference(value);
  } catch (err) {
    if (err instanceof OciError && err.code === 'TAG_INVALID') throw new OciError('MANIFEST_UNKNOWN', `manifest "${value}" is unknown`);
    throw err;
  }
}

export async function getManifest(call: OciCall, reference: string, head: boolean): Promise<void> {
  const { deps, target, reply } = call;
  const ref = readReference(reference);
  const found = await deps.members.resolve(target.index, target.repo, ref);
  const unknown = () => new OciError('MANIFEST_UNKNOWN', `manifest "${reference}" is unknown in ${target.name}`);
  if (!found) throw unknown();
  // As for blobs: bytes /v2 no longer holds (its blob was DELETEd) are not served, even when
  // another ecosystem keeps the same bytes alive.
  const [bytes, held] = await Promise.all([deps.manifestBytes.get(found.hex), deps.holds.isHeld(found.hex)]);
  if (!bytes || !held) throw unknown();
  reply
    .header('Content-Type', found.record.mediaType)
    .header('Docker-Content-Digest', `sha256:${found.hex}`)
    .header('Content-Length', String(found.record.size));
  await reply.send(head ? undefined : bytes);
}

/** Reads the request body into memory, refusing it as soon as it passes the manifest limit. */
async function readCapped(request: FastifyRequest): Promise<Buffer> {
  const tooLarge = () => new OciError('MANIFEST_INVALID', `manifest bodies are limited to ${MAX_MANIFEST_BYTES} bytes (4 MiB)`);
  const declared = Number(request.headers['content-length'] ?? '0');
  if (declared > MAX_MANIFEST_BYTES) throw tooLarge();
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of request.raw as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > MAX_MANIFEST_BYTES) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function stringMap(v: unknown): Record<string, string> | undefined {
  if (!isObject(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return Object.keys(out).length > 0 ? out : undefined;
}

function mediaTypeOf(request: FastifyRequest, doc: Json): string {
  const header = request.headers['content-type']?.split(';')[0]?.trim();
  if (header && header !== 'application/octet-stream') return header;
  return typeof doc.mediaType === 'string' ? doc.mediaType : OCI_MANIFEST;
}

/** The referrers-API descriptor: `artifactType` falls back to the config media type for image manifests (image-spec). */
function describe(doc: Json, mediaType: string, hex: string, size: number): Descriptor {
  const d: Descriptor = { mediaType, digest: `sha256:${hex}`, size };
  const config = isObject(doc.config) ? doc.config : undefined;
  if (typeof doc.artifactType === 'string' && doc.artifactType !== '') d.artifactType = doc.artifactType;
  else if (mediaType !== OCI_INDEX && typeof config?.mediaType === 'string') d.artifactType = config.mediaType;
  const annotations = stringMap(doc.annotations);
  if (annotations) d.annotations = annotations;
  return d;
}

function subjectOf(doc: Json): { digest: string; hex: string } | undefined {
  const subject = isObject(doc.subject) ? doc.subject : undefined;
  if (typeof subject?.digest !== 'string') return undefined;
  const m = /^sha256:([a-f0-9]{64})$/.exec(subject.digest);
  return m?.[1] ? { digest: subject.digest, hex: m[1] } : undefined;
}

export async function putManifest(call: OciCall, reference: string): Promise<void> {
  const { deps, target, request, reply } = call;
  const hosted = authorizeWrite(deps.ctx, target.index, request);
  const ref = parseReference(reference);
  const body = await readCapped(request);
  const hex = createHash('sha256').update(body).digest('hex');
  if (ref.kind === 'digest' && ref.hex !== hex) {
    throw new OciError('DIGEST_INVALID', `the manifest body has digest sha256:${hex}, not the sha256:${ref.hex} of the request`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    throw new OciError('MANIFEST_INVALID', 'the manifest is not valid JSON');
  }
  if (!isObject(doc)) throw new OciError('MANIFEST_INVALID', 'the manifest is not a JSON object');

  const mediaType = mediaTypeOf(request, doc);
  const subject = subjectOf(doc);
  const record: ManifestRecord = {
    mediaType,
    size: body.length,
    descriptor: describe(doc, mediaType, hex, body.length),
    pushedAt: new Date().toISOString(),
  };
  if (subject) record.subject = subject.hex;

  // The hold, then the bytes, then the documents that point at them.
  await deps.holds.hold(hex);
  await deps.ctx.stores.blobs.put(Readable.from([body]), hex);
  await deps.members.hosted(hosted).putManifest(target.repo, hex, record, ref.kind === 'tag' ? ref.tag : undefined);

  reply.code(201).header('Location', manifestLocation(target.name, hex)).header('Docker-Content-Digest', `sha256:${hex}`);
  if (subject) reply.header('OCI-Subject', subject.digest);
  await reply.header('Content-Length', '0').send();
}

/**
 * Drops the manifest from this repository only. Its bytes and the OCI hold on them stay: the
 * same manifest may be recorded in other repositories or indexes, and the hold is not counted
 * per repository. Blob DELETE of the digest is what lets the bytes go.
 */
export async function deleteManifest(call: OciCall, reference: string): Promise<void> {
  const { deps, target, request, reply } = call;
  const hosted = authorizeWrite(deps.ctx, target.index, request);
  const ref = readReference(reference);
  const repos = deps.members.hosted(hosted);
  const removed = ref.kind === 'tag' ? await repos.deleteTag(target.repo, ref.tag) : await repos.deleteManifest(target.repo, ref.hex);
  if (!removed) throw new OciError('MANIFEST_UNKNOWN', `manifest "${reference}" is unknown in ${target.name}`);
  await reply.code(202).header('Content-Length', '0').send();
}
