/**
 * The index namespace as a fastify plugin: `/{route}/...` of every index whose ecosystem serves
 * under its route. The longest route on whole segments wins (http/resolve.ts); the ecosystem
 * answers the rest of the path, and its failures in its own words (`Ecosystem.answerError`). Registered
 * last: the server's own paths (`/+api`, `/metrics`, ...) are static routes and win over this catch-all.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { IndexConfig } from '../../config/types.js';
import type { Ecosystem } from '../../ecosystem/ecosystem.js';
import type { ErrorHandler } from '../../ecosystem/error-handler.js';
import { HttpError } from '../../http/errors.js';
import { requestPath } from '../../http/path.js';
import { resolveRoute } from '../../http/resolve.js';
import type { ReadGate } from '../../access/read-gate.js';

export interface IndexNamespaceOptions {
  /** The indexes served under their route, in config order. */
  routed: readonly IndexConfig[];
  ecosystemOf: (index: IndexConfig) => Ecosystem | undefined;
  /** Answers what no ecosystem took on: an unsafe path, a path no index serves. */
  answerError: ErrorHandler;
  /** Who may read a private index (access/read-gate.ts). */
  readGate: ReadGate;
}

/** Reads need the gate's leave on a private index; writes are checked by their own handlers. */
const READS = new Set(['GET', 'HEAD']);

export async function indexNamespace(scope: FastifyInstance, { routed, ecosystemOf, answerError, readGate }: IndexNamespaceOptions): Promise<void> {
  /** The ecosystem a request was handed to, whose error handler answers its failures. */
  const servedBy = new WeakMap<FastifyRequest, Ecosystem>();
  scope.setErrorHandler((err, request, reply) => (servedBy.get(request)?.answerError ?? answerError)(err, request, reply));
  scope.all('/*', async (request, reply) => {
    const path = requestPath(request.raw);
    const hit = resolveRoute(routed, path.segments);
    if (!hit) throw new HttpError(404, `no index serves /${path.segments.join('/')}`);
    const ecosystem = ecosystemOf(hit.index);
    if (ecosystem) servedBy.set(request, ecosystem);
    if (READS.has(request.method)) readGate.require(hit.index, request);
    await ecosystem?.handleIndexRequest?.({
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
