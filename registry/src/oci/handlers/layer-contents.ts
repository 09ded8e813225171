/**
 * `GET /v2/<name>/blobs/<digest>/contents`: a browser for tar layers (gzip or plain), an HTTP
 * mapping over `archive/`. Without a query it lists the members; with `member=<path>&offset=<n>`
 * it previews one text member in bounded chunks. Each walk holds one of the server's archive walk
 * slots (429 TOOMANYREQUESTS when none frees in time), and listings are kept by the blob's digest.
 */
import {
  ArchiveError,
  blobSource,
  listMembers,
  readMember,
  type ArchiveErrorKind,
  type ArchiveFormat,
  type ArchiveLimits,
  type ArchiveSource,
  type MemberContent,
  type MemberKind,
} from '../../archive/index.js';
import { ClientGoneError, clientGone } from '../../http/client-gone.js';
import { OciError, OciStatusError } from '../model/errors.js';
import { parseDigest } from '../model/names.js';
import { REQUEST_READ } from '../../storage/types.js';
import type { OciCall } from './exchange.js';

export const MAX_MEMBERS = 10_000;
export const PREVIEW_CHUNK = 64 * 1024;
/** A file is previewable when its first this-many bytes look like text. */
const SNIFF_BYTES = 8 * 1024;

/** Layers are bigger than the archives `archive/` is tuned for. */
const LAYER_LIMITS: Partial<ArchiveLimits> = {
  maxMembersListed: MAX_MEMBERS,
  maxPreviewBytes: PREVIEW_CHUNK,
  maxBytesPerRequest: 4 * 1024 * 1024 * 1024,
  // Finding a member walks the whole layer; images with many small files are common.
  maxEntriesScanned: 1_000_000,
  // Above deflate's ~1032:1 ceiling, i.e. off: zero-filled files in layers are legitimate, and the
  // byte and time budgets already bound the work.
  maxCompressionRatio: 1100,
  timeBudgetMs: 60_000,
};

export interface LayerMember {
  path: string;
  size: number;
  kind: MemberKind;
  previewable: boolean;
}

/** Status and code for each archive refusal; the message is the archive module's. */
const REFUSALS: Record<ArchiveErrorKind, [number, string]> = {
  'not-found': [404, 'MEMBER_UNKNOWN'],
  'not-a-file': [415, 'MEMBER_NOT_TEXT'],
  unsafe: [415, 'MEMBER_NOT_TEXT'],
  range: [416, 'OFFSET_INVALID'],
  unsupported: [422, 'LAYER_UNREADABLE'],
  corrupt: [422, 'LAYER_UNREADABLE'],
  'too-large': [422, 'LAYER_UNREADABLE'],
  timeout: [422, 'LAYER_UNREADABLE'],
};

export async function layerContents(call: OciCall, digest: string): Promise<void> {
  const hex = parseDigest(digest);
  const member = call.query.get('member');
  const offsetText = call.query.get('offset') ?? '0';
  if (member !== null && !/^\d+$/.test(offsetText)) {
    throw new OciStatusError(416, 'OFFSET_INVALID', `offset "${offsetText}" is not a non-negative integer`);
  }
  // Asked on every request, cached listing or not: a deleted blob is 404 at once. Bytes only another
  // repository, index or ecosystem holds (a Python sdist, a blob this repository deleted) are not ours to browse.
  let [source, held] = await Promise.all([blobSource(call.deps.blobs, hex), call.deps.holds.visible(call.target.index, call.target.repo, hex, REQUEST_READ)]);
  if (!source || !held) {
    // A cached index fetches the layer once, through the same single flight as a blob GET.
    for (const cached of await call.deps.members.pullThrough(call.target.index, call.target.repo)) {
      if ((await cached.blobs.ensure(call.target.repo, hex)) === 'held') break;
    }
    [source, held] = await Promise.all([blobSource(call.deps.blobs, hex), call.deps.holds.visible(call.target.index, call.target.repo, hex)]);
  }
  if (!source || !held) throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  const walks = call.deps.archiveWalks;
  const signal = clientGone(call.reply);
  try {
    if (member === null) {
      // The blob's bytes decide the listing: its digest is the whole key.
      const body = await walks.listing(`layer:${hex}`, () => renderListing(source), signal);
      // The charset fastify adds to a JSON string; a Buffer body gets none by itself.
      await call.reply.type('application/json; charset=utf-8').send(body);
    } else {
      await sendPreview(call, await walks.run(() => readPreview(source, member, Number(offsetText)), signal), member);
    }
  } catch (err) {
    if (err instanceof ClientGoneError) throw new OciStatusError(err.status, 'CLIENT_GONE', err.message);
    if (!(err instanceof ArchiveError)) throw err;
    const [status, code] = REFUSALS[err.kind];
    const message = err.kind === 'corrupt' ? `blob sha256:${hex} cannot be read as a tar or gzip-compressed tar layer: ${err.message}` : err.message;
    throw new OciStatusError(status, code, message);
  }
}

/** Gzip or plain tar by the blob's magic bytes: media types and names are not to be trusted. */
async function layerFormat(source: ArchiveSource): Promise<ArchiveFormat> {
  if (source.size === 0) return 'tar';
  const magic = Buffer.concat(await (await source.open({ start: 0, end: Math.min(source.size, 4) - 1 })).toArray());
  if (magic[0] === 0x1f && magic[1] === 0x8b) return 'tar.gz';
  if (magic.equals(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]))) {
    throw new ArchiveError('unsupported', 'the layer is zstd-compressed; only plain and gzip-compressed tar layers can be browsed');
  }
  return 'tar';
}

/** The listing's JSON bytes, as kept in the listings cache. */
async function renderListing(source: ArchiveSource): Promise<Buffer> {
  const listing = await listMembers(source, await layerFormat(source), { limits: LAYER_LIMITS, sniffBytes: SNIFF_BYTES });
  const members = listing.members.map(
    ({ path, size, kind, text }): LayerMember => ({
      // Layer listings show directories the way tar stores them, with a trailing slash.
      path: kind === 'directory' ? `${path}/` : path,
      size,
      kind,
      previewable: kind === 'file' && text === true,
    }),
  );
  const payload: { members: LayerMember[]; truncated?: boolean } = { members };
  if (listing.truncated) payload.truncated = true;
  return Buffer.from(JSON.stringify(payload));
}

async function readPreview(source: ArchiveSource, member: string, offset: number): Promise<MemberContent> {
  // A leading `/` was always accepted, as a leading `./` is (the archive module strips that one).
  const path = member.replace(/^\/+/, '');
  return readMember(source, await layerFormat(source), path, { limits: LAYER_LIMITS, sniffBytes: SNIFF_BYTES, offset, firstMatch: true });
}

async function sendPreview(call: OciCall, content: MemberContent, member: string): Promise<void> {
  if (!content.text) throw new OciStatusError(415, 'MEMBER_NOT_TEXT', `member "${member}" is not a text file and cannot be previewed`);
  const reply = call.reply;
  reply.header('x-velodex-member-size', String(content.size)).header('x-velodex-member-offset', String(content.offset));
  if (content.nextOffset !== null) reply.header('x-velodex-next-offset', String(content.nextOffset));
  await reply.type('text/plain; charset=utf-8').send(content.data);
}
