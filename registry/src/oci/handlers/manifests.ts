/**
 * Manifests and image indexes: PUT checks the body (model/manifest-check.ts) and that the target
 * repository sees every blob an image manifest names, holds what the manifest names and its own
 * bytes for the repository (read/index-holds.ts), stores the body byte-for-byte under its sha256
 * (so the digest a client computed stays valid), records the media type, subject and referrer
 * descriptor, then points the tag at it. GET/HEAD resolve through the index's members, hosted
 * first. DELETE by digest drops the record and the repository's hold on the bytes (removal.ts).
 */
import { noteWrite } from '../../access/auth.js';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import type { HostedIndex } from '../../config/types.js';
import { REQUEST_READ } from '../../storage/types.js';
import { reportIfRejected } from '../../http/verified-read.js';
import { requestBody } from '../../http/request-body.js';
import { OciError } from '../model/errors.js';
import { checkManifest, MAX_MANIFEST_BYTES } from '../model/manifest-check.js';
import { manifestRecord } from '../model/manifest-record.js';
import { parseReference, type Reference } from '../model/names.js';
import { viewOf } from '../read/index-holds.js';
import { ensureQuota } from './quota.js';
import { authorizeWriteBy } from './access.js';
import type { OciCall } from './exchange.js';
import { manifestLocation } from './locations.js';
import { removeManifest, removeTag } from './removal.js';
import { recordManifestWrite } from '../status.js';
import type { ManifestRecord } from '../model/meta.js';

/** Blobs of one manifest checked at once. */
const CHECKS_AT_ONCE = 8;
const SHA256_DIGEST = /^sha256:[a-f0-9]{64}$/;

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
  const found = await deps.members.resolve(target.index, target.repo, ref, REQUEST_READ);
  const unknown = () => new OciError('MANIFEST_UNKNOWN', `manifest "${reference}" is unknown in ${target.name}`);
  if (!found) throw unknown();
  // As for blobs: bytes the recording repository no longer holds (its blob was DELETEd) are not
  // served, even when another repository, index or ecosystem keeps the same bytes alive.
  const counters = deps.counters.index(target.index.route);
  const stored = deps.blobBytes.get(found.hex).catch((err: unknown) => {
    reportIfRejected(err, call.request.log, () => counters.add('rejected', 1, target.repo.join('/'), `sha256:${found.hex}`));
    throw err;
  });
  // `found` is seen by the repository that recorded it (members resolve only what they see).
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
  for await (const chunk of requestBody(request.raw) as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > MAX_MANIFEST_BYTES) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

/**
 * What repository `repo` of `hosted` sees of the digests a manifest names before it is recorded:
 * `missing`, the first config or layer (of `required`) it does not see; `seen`, those of `named`
 * it holds itself or through an earlier version's index-wide hold, which the PUT then touches (holds
 * again) before it checks their bytes. A named digest it does not see (an index's child pushed
 * elsewhere, or not at all) is left alone: holding it would show the repository bytes another
 * repository or index stores later. A digest of another algorithm than sha256 can never be held
 * (the store is sha256 only). One holds read per digest, `CHECKS_AT_ONCE` at a time.
 */
async function namedBlobs(call: OciCall, hosted: HostedIndex, required: readonly string[], named: readonly string[]): Promise<{ missing?: string; seen: string[] }> {
  const { deps, target } = call;
  const unsupported = required.find((d) => !SHA256_DIGEST.test(d));
  if (unsupported !== undefined) return { missing: unsupported, seen: [] };
  const requiredHexes = new Set(required.map((d) => d.slice('sha256:'.length)));
  const seen: string[] = [];
  const visible = async (hex: string): Promise<boolean> => {
    const { own, legacy } = viewOf(await deps.holds.holders(hex), hosted, target.repo);
    if (own || legacy) seen.push(hex);
    return own || legacy || !requiredHexes.has(hex);
  };
  const hexes = [...new Set([...requiredHexes, ...named])];
  for (let i = 0; i < hexes.length; i += CHECKS_AT_ONCE) {
    const batch = hexes.slice(i, i + CHECKS_AT_ONCE);
    const found = await Promise.all(batch.map(visible));
    const missing = batch.find((_, j) => !found[j]);
    if (missing !== undefined) return { missing: `sha256:${missing}`, seen };
  }
  return { seen };
}

export async function putManifest(call: OciCall, reference: string): Promise<void> {
  const { deps, target, request, reply } = call;
  const { hosted, credential } = authorizeWriteBy(call);
  const ref = parseReference(reference);
  const body = await readCapped(request);
  const hex = createHash('sha256').update(body).digest('hex');
  if (ref.kind === 'digest' && ref.hex !== hex) {
    throw new OciError('DIGEST_INVALID', `the manifest body has digest sha256:${hex}, not the sha256:${ref.hex} of the request`);
  }
  const checked = checkManifest(body, request.headers['content-type']);
  const holder = deps.holds.ofRepo(hosted.name, target.repo);
  // As the distribution registry: an image whose config or layers this repository lacks could
  // never be pulled. An index's children and a subject may be absent.
  const { missing, seen } = await namedBlobs(call, hosted, checked.blobs, checked.references);
  const unknown = (digest: string) =>
    new OciError('MANIFEST_BLOB_UNKNOWN', `blob ${digest} named by the manifest is unknown in ${target.name}; push it (or mount it) there first`, {}, { digest });
  if (missing !== undefined) throw unknown(missing);
  // Touched before the record is written, and their bytes checked after (lifecycle/collect.ts): a
  // collection that released one of them first makes this push fail here, never leaves a
  // manifest naming deleted bytes.
  const gone = await holder.touchStored(seen);
  const required = new Set(checked.blobs);
  const lost = gone.map((h) => `sha256:${h}`).find((d) => required.has(d));
  if (lost !== undefined) throw unknown(lost);

  const record: ManifestRecord = { ...manifestRecord(checked, hex, body.length), pushedBy: credential };
  await ensureQuota(call, hosted, hex, body.length);

  // The hold, then the bytes, then the documents that point at them.
  await holder.hold(hex, body.length);
  await deps.blobs.put(Readable.from([body]), hex);
  const repos = deps.members.hosted(hosted);
  await repos.putManifest(target.repo, hex, record, ref.kind === 'tag' ? ref.tag : undefined);
  deps.counters.index(target.index.route).add('uploads', 1, target.repo.join('/'));
  await recordManifestWrite(deps.summaries, repos, target.repo, request.log, { hex, time: record.pushedAt, by: credential, ...(ref.kind === 'tag' ? { tag: ref.tag } : {}) });
  noteWrite(request, deps.clientAddress, target.index, credential, `push ${target.name}${ref.kind === 'tag' ? `:${ref.tag}` : ''}@sha256:${hex}`);

  reply.code(201).header('Location', manifestLocation(target.name, hex)).header('Docker-Content-Digest', `sha256:${hex}`);
  if (checked.subject) reply.header('OCI-Subject', checked.subject.digest);
  await reply.header('Content-Length', '0').send();
}

/**
 * Drops a tag, or by digest the manifest, from this repository only (removal.ts: the path a
 * retention run takes too). By digest the repository then lets go of its hold on the manifest's
 * bytes, unless another of its manifests names it.
 */
export async function deleteManifest(call: OciCall, reference: string): Promise<void> {
  const { deps, target, request, reply } = call;
  const { hosted, actor, credential } = authorizeWriteBy(call);
  const ref = readReference(reference);
  const origin = { via: target.index, requestId: request.id, log: request.log, ...(actor ? { actor } : {}) };
  const removed =
    ref.kind === 'tag'
      ? (await removeTag(deps, hosted, target.repo, ref.tag, origin)) !== undefined
      : await removeManifest(deps, hosted, target.repo, ref.hex, origin);
  if (!removed) throw new OciError('MANIFEST_UNKNOWN', `manifest "${reference}" is unknown in ${target.name}`);
  noteWrite(request, deps.clientAddress, target.index, credential, `delete ${target.name}${ref.kind === 'tag' ? `:${ref.tag}` : `@sha256:${ref.hex}`}`);
  await reply.code(202).header('Content-Length', '0').send();
}
