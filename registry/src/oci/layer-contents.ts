/**
 * `GET /v2/<name>/blobs/<digest>/contents`: a browser for tar layers (gzip or plain), read as a
 * stream. Without a query it lists the members; with `member=<path>&offset=<n>` it previews one
 * text member in bounded chunks. Memory stays bounded: at most MAX_MEMBERS entries are listed
 * and a preview holds one chunk.
 */
import { createGunzip } from 'node:zlib';
import type { Readable } from 'node:stream';
import { extract as tarExtract, type ExtractEvents, type Header as Headers } from 'tar-stream';
import type { OciCall } from './context.js';
import { OciError, OciStatusError } from './errors.js';
import { parseDigest } from './names.js';

export const MAX_MEMBERS = 10_000;
export const PREVIEW_CHUNK = 64 * 1024;
const SNIFF_BYTES = 8 * 1024;

/** The body stream of one tar entry (a streamx Readable). */
type EntryBody = ExtractEvents['entry'][1];

export interface LayerMember {
  path: string;
  size: number;
  kind: 'file' | 'directory' | 'symlink' | 'hardlink' | 'other';
  previewable: boolean;
}

function kindOf(header: Headers): LayerMember['kind'] {
  switch (header.type) {
    case 'file':
    case 'contiguous-file':
      return 'file';
    case 'directory':
      return 'directory';
    case 'symlink':
      return 'symlink';
    case 'link':
      return 'hardlink';
    default:
      return 'other';
  }
}

function normalise(path: string): string {
  return path.replace(/^(\.\/|\/)+/, '').replace(/\/+$/, '');
}

/** Text when the head has no NUL byte and is valid UTF-8 (a sequence cut at the end is allowed). */
export function looksLikeText(head: Buffer): boolean {
  if (head.includes(0)) return false;
  let end = head.length;
  // Drop an incomplete multi-byte sequence at the cut.
  for (let back = 1; back <= 3 && end - back >= 0; back++) {
    const byte = head[end - back] as number;
    if ((byte & 0xc0) === 0x80) continue;
    if (byte >= 0xc0) {
      const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
      if (back < need) end -= back;
    }
    break;
  }
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head.subarray(0, end));
    return true;
  } catch {
    return false;
  }
}

class Unreadable extends Error {}

/**
 * Feeds each tar entry to `onEntry`, which must consume the body and resolve to `false` to stop.
 * Corrupt gzip or tar data rejects with `Unreadable`.
 */
function walk(source: Readable, gzip: boolean, onEntry: (header: Headers, body: EntryBody) => Promise<boolean>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const extract = tarExtract();
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      source.destroy();
      if (err) reject(err);
      else resolve();
    };
    const unreadable = (err: Error) => finish(new Unreadable(err.message));
    extract.on('entry', (header, body, next) => {
      onEntry(header, body).then(
        (more) => {
          if (more) return next();
          finish();
          extract.destroy();
        },
        (err: Error) => {
          finish(err);
          extract.destroy();
        },
      );
    });
    extract.on('finish', () => finish());
    extract.on('error', unreadable);
    source.on('error', (err) => finish(err));
    if (gzip) {
      const gunzip = createGunzip();
      gunzip.on('error', unreadable);
      source.pipe(gunzip).pipe(extract);
    } else {
      source.pipe(extract);
    }
  });
}

/** Reads a body to its end, keeping the first `headBytes` and the bytes of [from, to). */
function consume(body: EntryBody, headBytes: number, from = 0, to = 0): Promise<{ head: Buffer; window: Buffer }> {
  return new Promise((resolve, reject) => {
    const head: Buffer[] = [];
    const window: Buffer[] = [];
    let headLen = 0;
    let pos = 0;
    body.on('data', (data: unknown) => {
      const chunk = data as Buffer;
      if (headLen < headBytes) {
        const part = chunk.subarray(0, headBytes - headLen);
        head.push(part);
        headLen += part.length;
      }
      const lo = Math.max(from, pos);
      const hi = Math.min(to, pos + chunk.length);
      if (hi > lo) window.push(chunk.subarray(lo - pos, hi - pos));
      pos += chunk.length;
    });
    body.on('end', () => resolve({ head: Buffer.concat(head), window: Buffer.concat(window) }));
    body.on('error', reject);
  });
}

async function openLayer(call: OciCall, hex: string): Promise<{ stream: Readable; gzip: boolean }> {
  const blobs = call.deps.ctx.stores.blobs;
  const info = await blobs.stat(hex);
  if (!info) throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  let gzip = false;
  if (info.size >= 2) {
    const magic = await blobs.get(hex, { start: 0, end: 1 });
    const bytes: Buffer[] = [];
    if (magic) for await (const c of magic as AsyncIterable<Buffer>) bytes.push(c);
    const b = Buffer.concat(bytes);
    gzip = b[0] === 0x1f && b[1] === 0x8b;
  }
  const stream = await blobs.get(hex);
  if (!stream) throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored`);
  return { stream, gzip };
}

function unreadableLayer(hex: string, err: unknown): OciStatusError {
  const why = err instanceof Error ? err.message : String(err);
  return new OciStatusError(422, 'LAYER_UNREADABLE', `blob sha256:${hex} cannot be read as a tar or gzip-compressed tar layer: ${why}`);
}

export async function layerContents(call: OciCall, digest: string): Promise<void> {
  const hex = parseDigest(digest);
  const member = call.query.get('member');
  if (member === null) return listMembers(call, hex);
  const offsetText = call.query.get('offset') ?? '0';
  if (!/^\d+$/.test(offsetText)) {
    throw new OciStatusError(416, 'OFFSET_INVALID', `offset "${offsetText}" is not a non-negative integer`);
  }
  return previewMember(call, hex, member, Number(offsetText));
}

async function listMembers(call: OciCall, hex: string): Promise<void> {
  const { stream, gzip } = await openLayer(call, hex);
  const members: LayerMember[] = [];
  let truncated = false;
  try {
    await walk(stream, gzip, async (header, body) => {
      const kind = kindOf(header);
      const { head } = await consume(body, kind === 'file' ? SNIFF_BYTES : 0);
      members.push({ path: header.name, size: header.size ?? 0, kind, previewable: kind === 'file' && looksLikeText(head) });
      if (members.length >= MAX_MEMBERS) {
        truncated = true;
        return false;
      }
      return true;
    });
  } catch (err) {
    if (err instanceof Unreadable) throw unreadableLayer(hex, err);
    throw err;
  }
  const payload: { members: LayerMember[]; truncated?: boolean } = { members };
  if (truncated) payload.truncated = true;
  await call.reply.type('application/json').send(JSON.stringify(payload));
}

async function previewMember(call: OciCall, hex: string, member: string, offset: number): Promise<void> {
  const { stream, gzip } = await openLayer(call, hex);
  const wanted = normalise(member);
  let found: { header: Headers; head: Buffer; window: Buffer } | null = null;
  try {
    await walk(stream, gzip, async (header, body) => {
      if (header.name !== member && normalise(header.name) !== wanted) {
        await consume(body, 0);
        return true;
      }
      const { head, window } = await consume(body, SNIFF_BYTES, offset, offset + PREVIEW_CHUNK);
      found = { header, head, window };
      return false;
    });
  } catch (err) {
    if (err instanceof Unreadable) throw unreadableLayer(hex, err);
    throw err;
  }
  const hit = found as { header: Headers; head: Buffer; window: Buffer } | null;
  if (!hit) throw new OciStatusError(404, 'MEMBER_UNKNOWN', `the layer has no member "${member}"`);
  const size = hit.header.size ?? 0;
  if (kindOf(hit.header) !== 'file' || !looksLikeText(hit.head)) {
    throw new OciStatusError(415, 'MEMBER_NOT_TEXT', `member "${member}" is not a text file and cannot be previewed`);
  }
  if (offset > size) {
    throw new OciStatusError(416, 'OFFSET_INVALID', `offset ${offset} is past the end of member "${member}" (${size} bytes)`);
  }
  const reply = call.reply;
  reply.header('x-velodex-member-size', String(size)).header('x-velodex-member-offset', String(offset));
  const next = offset + hit.window.length;
  if (next < size) reply.header('x-velodex-next-offset', String(next));
  await reply.type('text/plain; charset=utf-8').send(hit.window);
}
