/** Sends a rendered page with its validators, answering `If-None-Match` with 304. */
import type { IndexRequest } from '../../ecosystem/ecosystem.js';
import { answeredNotModified } from '../../http/conditional.js';
import type { RenderedPage } from './page-cache.js';

export function sendPage(req: IndexRequest, page: RenderedPage, contentType: string, headers: Record<string, string> = {}): void {
  const { request, reply } = req;
  // Pages change on upload: let clients keep them but revalidate every time (cheap via ETag).
  reply.headers({ ...headers, etag: page.etag, 'cache-control': 'no-cache' });
  if (answeredNotModified(request, reply, page.etag)) return;
  void reply.code(200).type(contentType).send(page.body);
}

/**
 * A permanent redirect to another path under the same index route, given as decoded segments.
 * `Location` is relative to the request URL (RFC 9110 allows it; pip, uv and browsers resolve
 * it), so a proxy that mounts velodex under a prefix keeps working. The query string is kept.
 */
export function redirect(req: IndexRequest, target: readonly string[], trailingSlash: boolean): void {
  const query = req.query.toString();
  const location = relativeLocation(req.rest, req.trailingSlash, target, trailingSlash) + (query ? `?${query}` : '');
  void req.reply.code(301).header('location', location).send();
}

/** The relative reference from the URL `from` (segments under one base) to `to` under the same base. */
export function relativeLocation(from: readonly string[], fromSlash: boolean, to: readonly string[], toSlash: boolean): string {
  // The folder the client resolves against: the path up to its last slash.
  const dir = fromSlash ? from : from.slice(0, -1);
  let common = 0;
  while (common < dir.length && common < to.length - (toSlash ? 0 : 1) && dir[common] === to[common]) common++;
  const path = [...Array<string>(dir.length - common).fill('..'), ...to.slice(common).map(encodeURIComponent)];
  let ref = path.join('/') + (toSlash && to.length > common ? '/' : '');
  if (toSlash && to.length === common && path.length > 0) ref += '/';
  // An empty reference would mean "this URL". (Segments are percent-encoded: no colon can make
  // the first one read as a scheme.)
  return ref === '' ? './' : ref;
}
