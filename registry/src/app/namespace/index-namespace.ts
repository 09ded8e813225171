/**
 * The index namespace as a fastify plugin: `/{route}/...` of every index whose ecosystem serves
 * under its route. The longest route on whole segments wins (http/resolve.ts); the ecosystem
 * answers the rest of the path. Registered last: the server's own paths (`/+api`, `/metrics`, ...) are
 * static routes and win over this catch-all.
 */
import type { FastifyInstance } from 'fastify';
import type { IndexConfig } from '../../config/types.js';
import type { Ecosystem } from '../../ecosystem/ecosystem.js';
import { HttpError } from '../../http/errors.js';
import { requestPath } from '../../http/path.js';
import { resolveRoute } from '../../http/resolve.js';

export interface IndexNamespaceOptions {
  /** The indexes served under their route, in config order. */
  routed: readonly IndexConfig[];
  ecosystemOf: (index: IndexConfig) => Ecosystem | undefined;
}

export async function indexNamespace(scope: FastifyInstance, { routed, ecosystemOf }: IndexNamespaceOptions): Promise<void> {
  scope.all('/*', async (request, reply) => {
    const path = requestPath(request.raw);
    const hit = resolveRoute(routed, path.segments);
    if (!hit) throw new HttpError(404, `no index serves /${path.segments.join('/')}`);
    await ecosystemOf(hit.index)?.handleIndexRequest?.({
      index: hit.index,
      rest: hit.rest,
      trailingSlash: path.trailingSlash,
      query: new URLSearchParams(path.query),
      request,
      reply,
    });
    if (!reply.sent) return reply;
  });
}
