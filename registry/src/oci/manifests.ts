/**
 * Manifests and image indexes: PUT checks the body (manifest-check.ts) and that the target index
 * holds every blob an image manifest names, stores the body byte-for-byte under its sha256 (so the
 * digest a client computed stays valid), records the media type, subject and referrer descriptor,
 * then points the tag at it. GET/HEAD resolve through the index's members, hosted first.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { authorizeWrite } from './access.js';
import { manifestLocation, type OciCall } from './context.js';
import { OciError } from './errors.js';
import { checkManifest, isObject, OCI_INDEX, type Json } from './manifest-check.js';
import type { Descriptor, ManifestRecord } from './meta.js';
import { parseReference, type Reference } from './names.js';
import type { Holder } from '../storage/holds.js';
import type { BlobStore } from '../storage/types.js';
import { recordManifestWrite } from './status.js';
import { reportIfRejected } from '../http/verified-read.js';

export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
/** Blobs of one manifest checked at once. */
const CHECKS_AT_ONCE = 8;

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
  // As for blobs: bytes the recording index no longer holds (its blob was DELETEd) are not
  // served, even when another index or ecosystem keeps the same bytes alive.
  const counters = deps.ctx.counters.index(target.index.route);
  const stored = deps.blobBytes.get(found.hex).catch((err: unknown) => {
    reportIfRejected(err, call.request.log, () => counters.add('rejected', 1, target.repo.join('/'), `sha256:${found.hex}`));
    throw err;
  });
  // `found` is held by the index that recorded it (members resolve only what they hold).
  const bytes = await stored;
  if (!bytes) throw unknown();
  reply
    .header('Content-Type', found.record.mediaType)
    .header('Docker-Content-Digest', `sha256:${found.hex}`)
    .header('Content-Length', String(found.record.size));
  // A manifest is the registry's page: what a pull asks for first.
  if (!head) counters.add('pages', 1, target.repo.join('/'));
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

function stringMap(v: unknown): Record<string, string> | undefined {
  if (!isObject(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return Object.keys(out).length > 0 ? out : undefined;
}

/** The referrers-API descriptor: `artifactType` falls back to the config media type for image manifests (image-spec). */
export function describe(doc: Json, mediaType: string, hex: string, size: number): Descriptor {
  const d: Descriptor = { mediaType, digest: `sha256:${hex}`, size };
  const config = isObject(doc.config) ? doc.config : undefined;
  if (typeof doc.artifactType === 'string' && doc.artifactType !== '') d.artifactType = doc.artifactType;
  else if (mediaType !== OCI_INDEX && typeof config?.mediaType === 'string') d.artifactType = config.mediaType;
  const annotations = stringMap(doc.annotations);
  if (annotations) d.annotations = annotations;
  return d;
}

/**
 * The first digest of `digests` the index does not hold with its bytes present, or undefined. A
 * digest of another algorithm than sha256 can never be held (the store is sha256 only).
 */
async function firstMissing(holder: Holder, blobs: BlobStore, digests: readonly string[]): Promise<string | undefined> {
  const present = async (digest: string) => {
    const hex = /^sha256:([a-f0-9]{64})$/.exec(digest)?.[1];
    if (!hex) return false;
    const [held, info] = await Promise.all([holder.isHeld(hex), blobs.stat(hex)]);
    return held && info !== null;
  };
  for (let i = 0; i < digests.length; i += CHECKS_AT_ONCE) {
    const batch = digests.slice(i, i + CHECKS_AT_ONCE);
    const found = await Promise.all(batch.map(present));
    const missing = batch.find((_, j) => !found[j]);
    if (missing !== undefined) return missing;
  }
  return undefined;
}

export async function putManifest(call: OciCall, reference: string): Promise<void> {
  const { deps, target, request, reply } = call;
  const hosted = authorizeWrite(call);
  const ref = parseReference(reference);
  const body = await readCapped(request);
  const hex = createHash('sha256').update(body).digest('hex');
  if (ref.kind === 'digest' && ref.hex !== hex) {
    throw new OciError('DIGEST_INVALID', `the manifest body has digest sha256:${hex}, not the sha256:${ref.hex} of the request`);
  }
  const checked = checkManifest(body, request.headers['content-type']);
  const holder = deps.holds.of(hosted.name);
  // As the distribution registry: an image whose config or layers this index lacks could never be
  // pulled. An index's children and a subject may be absent.
  const missing = await firstMissing(holder, deps.ctx.stores.blobs, checked.blobs);
  if (missing !== undefined) {
    throw new OciError('MANIFEST_BLOB_UNKNOWN', `blob ${missing} named by the manifest is unknown to index "${hosted.name}"; push it first`, {}, { digest: missing });
  }

  const { mediaType, doc, subject } = checked;
  const record: ManifestRecord = {
    mediaType,
    size: body.length,
    descriptor: describe(doc, mediaType, hex, body.length),
    pushedAt: new Date().toISOString(),
  };
  if (subject) record.subject = subject.hex;

  // The hold, then the bytes, then the documents that point at them.
  await holder.hold(hex);
  await deps.ctx.stores.blobs.put(Readable.from([body]), hex);
  const repos = deps.members.hosted(hosted);
  await repos.putManifest(target.repo, hex, record, ref.kind === 'tag' ? ref.tag : undefined);
  deps.ctx.counters.index(target.index.route).add('uploads', 1, target.repo.join('/'));
  await recordManifestWrite(deps.ctx, repos, target.repo, request.log, { hex, time: record.pushedAt, ...(ref.kind === 'tag' ? { tag: ref.tag } : {}) });

  reply.code(201).header('Location', manifestLocation(target.name, hex)).header('Docker-Content-Digest', `sha256:${hex}`);
  if (subject) reply.header('OCI-Subject', subject.digest);
  await reply.header('Content-Length', '0').send();
}

/**
 * Drops the manifest from this repository only. Its bytes and the index's hold on them stay: the
 * same manifest may be recorded in other repositories of the index, and the hold is not counted
 * per repository. Blob DELETE of the digest is what releases the index's hold.
 */
export async function deleteManifest(call: OciCall, reference: string): Promise<void> {
  const { deps, target, request, reply } = call;
  const hosted = authorizeWrite(call);
  const ref = readReference(reference);
  const repos = deps.members.hosted(hosted);
  const removed = ref.kind === 'tag' ? await repos.deleteTag(target.repo, ref.tag) : await repos.deleteManifest(target.repo, ref.hex);
  if (!removed) throw new OciError('MANIFEST_UNKNOWN', `manifest "${reference}" is unknown in ${target.name}`);
  await recordManifestWrite(deps.ctx, repos, target.repo, request.log);
  await reply.code(202).header('Content-Length', '0').send();
}
