/**
 * `GET /{route}/inspect/{sha256}/{filename}[/{member...}]`: lists the members of a stored archive
 * as JSON, or returns one member's bytes in bounded pages. The archive work is `archive/`'s; this
 * maps it to HTTP.
 *
 * - no member (or a member ending in `!/`, a nested archive): `{ filename, sha256, format,
 *   [path,] members, truncated }`;
 * - a member: its bytes from `?offset=` on, at most `MAX_PREVIEW_BYTES`, `text/plain;
 *   charset=utf-8` when they look like text, else `application/octet-stream`, with
 *   `x-velodex-member-size`, `x-velodex-member-offset` and, when more follows,
 *   `x-velodex-next-offset`.
 *
 * Whether the index serves `filename` with that sha256 is the caller's knowledge: pass `owns`,
 * or check before calling. Without either, any stored blob can be inspected under any archive name.
 * A listed file that is not stored yet (a cached one) is brought in through `fetch` first.
 *
 * Each walk holds one of the server's archive walk slots (429 with `Retry-After` when none frees in
 * time), and listings are kept by sha256, filename and nested path: the bytes never change.
 */
import {
  ArchiveError,
  blobSource,
  isProbablyText,
  listMembers,
  NESTING_SEPARATOR,
  readMember,
  requireFormat,
  utf8SafeLength,
  type ArchiveErrorKind,
} from '../../../archive/index.js';
import type { IndexRequest, ServerContext } from '../../../ecosystem/ecosystem.js';
import { clientGone } from '../../../http/client-gone.js';
import { HttpError } from '../../../http/errors.js';
import { isSha256Hex } from '../../../storage/types.js';

export interface InspectHooks {
  /** True when this index serves `filename` with these bytes; false gives 404. */
  owns?: (sha256: string, filename: string) => Promise<boolean>;
  /** Brings a listed but not yet stored file into the store (verified); called only when absent. */
  fetch?: (sha256: string, filename: string) => Promise<void>;
}

const STATUS: Record<ArchiveErrorKind, number> = {
  unsupported: 415,
  corrupt: 422,
  'too-large': 413,
  timeout: 422,
  'not-found': 404,
  unsafe: 400,
  'not-a-file': 400,
  range: 416,
};

/**
 * `member` is the path after the filename (segments joined with `/`), or null for the listing.
 * A request path ending in `/` after a member means a nested listing (`inner.tar.gz!/`).
 */
/** What inspection uses of the server's services: the stored bytes, scratch space, the cap on archive walks. */
export type InspectServices = Pick<ServerContext, 'stores' | 'scratchDir' | 'archiveWalks'>;

export async function handleInspect(
  ctx: InspectServices,
  req: IndexRequest,
  sha256: string,
  filename: string,
  member: string | null,
  hooks: InspectHooks = {},
): Promise<void> {
  const method = req.request.method;
  if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, `${method} is not allowed on inspect URLs`, { Allow: 'GET, HEAD' });
  if (!isSha256Hex(sha256)) throw new HttpError(404, `no stored file has sha256 ${sha256}`);
  if (hooks.owns && !(await hooks.owns(sha256, filename))) {
    throw new HttpError(404, `this index has no file ${filename} with sha256 ${sha256}`);
  }
  const path = member !== null && req.trailingSlash && !member.endsWith('/') ? `${member}/` : member;
  try {
    const format = requireFormat(filename);
    let source = await blobSource(ctx.stores.blobs, sha256);
    if (!source && hooks.fetch) {
      await hooks.fetch(sha256, filename);
      source = await blobSource(ctx.stores.blobs, sha256);
    }
    if (!source) throw new HttpError(404, `no stored file has sha256 ${sha256}`);
    const stored = source;
    const opts = { tmpDir: ctx.scratchDir };
    const signal = clientGone(req.reply);

    if (path === null || path === '' || path.endsWith(NESTING_SEPARATOR)) {
      const within = path ? path.slice(0, -NESTING_SEPARATOR.length) : undefined;
      // The bytes (sha256), how they are read (the filename's format) and the nested path decide the
      // body; the filename is in the key because the body names it.
      const key = `inspect:${JSON.stringify([sha256, filename, within ?? ''])}`;
      const body = await ctx.archiveWalks.listing(
        key,
        async () => {
          const listing = await listMembers(stored, format, { ...opts, within });
          const payload = { filename, sha256, format: listing.format, ...(within ? { path: within } : {}), members: listing.members, truncated: listing.truncated };
          return Buffer.from(JSON.stringify(payload));
        },
        signal,
      );
      // The charset fastify adds to a serialized object; a Buffer body gets none by itself.
      req.reply.code(200).type('application/json; charset=utf-8').send(body);
      return;
    }

    const offset = parseOffset(req.query.get('offset'));
    const content = await ctx.archiveWalks.run(() => readMember(stored, format, path, { ...opts, offset }), signal);
    let data = content.data;
    let next = content.nextOffset;
    const text = isProbablyText(data, { partial: next !== null });
    if (text && next !== null) {
      // End the page on a character boundary so every page decodes on its own.
      const cut = utf8SafeLength(data);
      if (cut > 0 && cut < data.length) {
        data = data.subarray(0, cut);
        next = content.offset + cut;
      }
    }
    req.reply.headers({
      'content-type': text ? 'text/plain; charset=utf-8' : 'application/octet-stream',
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
      'x-velodex-member-size': String(content.size),
      'x-velodex-member-offset': String(content.offset),
    });
    if (next !== null) req.reply.header('x-velodex-next-offset', String(next));
    req.reply.code(200).send(data);
  } catch (err) {
    if (err instanceof ArchiveError) throw new HttpError(STATUS[err.kind], err.message);
    throw err;
  }
}

function parseOffset(raw: string | null): number {
  if (raw === null || raw === '') return 0;
  if (!/^\d{1,15}$/.test(raw)) throw new HttpError(400, `offset must be a non-negative integer, not ${JSON.stringify(raw)}`);
  return Number(raw);
}
