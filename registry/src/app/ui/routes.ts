/**
 * The web UI outside the index namespace (spec 01, item 5): `GET /` (dashboard), `/admin/status`,
 * `/browse`, `/stats`, and the bundle under `/pkg/*`. The pages read the documents every client
 * reads (`/+api`, `/+status`, `/+stats`, Simple JSON, the OCI API, inspection); the server adds no
 * data path of its own. With `[admin] token` set, `/admin/status` answers 401 with a Basic
 * challenge until the browser sends the token (access/admin-auth.ts): the browser asks for it, and
 * sends it again when the page's script reads `/+status?details=admin` (same realm).
 *
 * Every page carries a Content-Security-Policy that allows only this origin's script, style,
 * images and fetches: no inline script or style, no framing, nothing external.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config/types.js';
import { DiscoveryBuilder } from '../../discovery/document.js';
import type { EcosystemDiscovery } from '../../discovery/types.js';
import { ADMIN_CHALLENGE, type AdminGate } from '../../access/admin-auth.js';
import { HttpError } from '../../http/errors.js';
import { loadBundle, type Bundle } from './bundle.js';
import { adminTokenBody, dashboardBody, renderPage, scriptedBody } from './pages.js';

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const YEAR_SECS = 365 * 24 * 60 * 60;

export interface UiOptions {
  config: Pick<Config, 'indexes' | 'metrics'>;
  ecosystems: readonly { id: string; discovery?: EcosystemDiscovery }[];
  bundle?: Bundle;
  /** Guards `/admin/status` when `[admin] token` is set; absent (tests of the pages alone): open. */
  admin?: AdminGate;
}

export async function uiRoutes(app: FastifyInstance, opts: UiOptions): Promise<void> {
  const bundle = opts.bundle ?? loadBundle();
  const parts = new Map(opts.ecosystems.flatMap((e) => (e.discovery ? [[e.id, e.discovery] as const] : [])));
  // Paths only (no origin): the page's links work whatever host the browser used.
  const dashboard = renderPage('dashboard', bundle, dashboardBody(new DiscoveryBuilder(opts.config, parts).document(null)));
  const pages = {
    status: renderPage('status', bundle, scriptedBody('status')),
    needsToken: renderPage('status', bundle, adminTokenBody(false)),
    wrongToken: renderPage('status', bundle, adminTokenBody(true)),
    browse: renderPage('browse', bundle, scriptedBody('browse')),
    stats: renderPage('stats', bundle, scriptedBody('stats')),
  };

  const sendPage = (reply: FastifyReply, body: string) =>
    reply
      .header('content-security-policy', CONTENT_SECURITY_POLICY)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .type('text/html; charset=utf-8')
      .send(body);

  app.get('/', (_req, reply) => sendPage(reply, dashboard));
  app.get('/admin/status', (request, reply) => {
    const denial = opts.admin?.refusal(request);
    if (!denial) return sendPage(reply, pages.status);
    return sendPage(reply.code(401).header('www-authenticate', ADMIN_CHALLENGE), denial === 'wrong-credentials' ? pages.wrongToken : pages.needsToken);
  });
  app.get('/browse', (_req, reply) => sendPage(reply, pages.browse));
  app.get('/stats', (_req, reply) => sendPage(reply, pages.stats));

  app.get('/pkg/*', (request: FastifyRequest<{ Params: { '*': string } }>, reply) => {
    const file = bundle.files.get(request.params['*']);
    if (!file) throw new HttpError(404, `no file ${request.params['*']} in the UI bundle (names change with every build; reload the page)`);
    reply.header('cache-control', `public, max-age=${YEAR_SECS}, immutable`).header('etag', file.etag).header('vary', 'accept-encoding').header('x-content-type-options', 'nosniff').type(file.type);
    if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
    const accepts = String(request.headers['accept-encoding'] ?? '');
    if (file.br && /\bbr\b/.test(accepts)) return reply.header('content-encoding', 'br').send(file.br);
    if (file.gzip && /\bgzip\b/.test(accepts)) return reply.header('content-encoding', 'gzip').send(file.gzip);
    return reply.send(file.body);
  });
}
