/** Sends a rendered page with its validators, answering `If-None-Match` with 304. */
import type { IndexRequest } from '../../http/ecosystem.js';
import { etagMatches, type RenderedPage } from './page-cache.js';

export function sendPage(req: IndexRequest, page: RenderedPage, contentType: string, headers: Record<string, string> = {}): void {
  const { request, reply } = req;
  // Pages change on upload: let clients keep them but revalidate every time (cheap via ETag).
  reply.headers({ ...headers, etag: page.etag, 'cache-control': 'no-cache' });
  if (etagMatches(request.headers['if-none-match'], page.etag)) {
    void reply.code(304).send();
    return;
  }
  void reply.code(200).type(contentType).send(page.body);
}

/** A permanent redirect to an absolute path of this server. */
export function redirect(req: IndexRequest, path: string, headers: Record<string, string> = {}): void {
  void req.reply.code(301).headers({ ...headers, location: path }).send();
}
