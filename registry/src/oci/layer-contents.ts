/**
 * `GET /v2/<name>/blobs/<digest>/contents`: a browser for tar layers (gzip or plain), an HTTP
 * mapping over `archive/`. Without a query it lists the members; with `member=<path>&offset=<n>`
 * it previews one text member in bounded chunks.
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
  type MemberKind,
} from '../archive/index.js';
import type { OciCall } from './context.js';
import { OciError, OciStatusError } from './errors.js';
import { parseDigest } from './names.js';

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
  const source = await blobSource(call.deps.ctx.stores.blobs, hex);
  if (!source) throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  try {
    const format = await layerFormat(source);
    if (member === null) await sendListing(call, source, format);
    else await sendPreview(call, source, format, member, Number(offsetText));
  } catch (err) {
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

async function sendListing(call: OciCall, source: ArchiveSource, format: ArchiveFormat): Promise<void> {
  const listing = await listMembers(source, format, { limits: LAYER_LIMITS, sniffBytes: SNIFF_BYTES });
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
  await call.reply.type('application/json').send(JSON.stringify(payload));
}

async function sendPreview(call: OciCall, source: ArchiveSource, format: ArchiveFormat, member: string, offset: number): Promise<void> {
  // A leading `/` was always accepted, as a leading `./` is (the archive module strips that one).
  const path = member.replace(/^\/+/, '');
  const content = await readMember(source, format, path, { limits: LAYER_LIMITS, sniffBytes: SNIFF_BYTES, offset, firstMatch: true });
  if (!content.text) throw new OciStatusError(415, 'MEMBER_NOT_TEXT', `member "${member}" is not a text file and cannot be previewed`);
  const reply = call.reply;
  reply.header('x-velodex-member-size', String(content.size)).header('x-velodex-member-offset', String(offset));
  if (content.nextOffset !== null) reply.header('x-velodex-next-offset', String(content.nextOffset));
  await reply.type('text/plain; charset=utf-8').send(content.data);
}
