/**
 * Mounts `GET /+api` and `GET /{route}/+api` for every index whose ecosystem takes part in
 * discovery. Static routes: fastify's router prefers them to the index namespace's wildcard, so
 * the answer is the same whichever ecosystem serves the route (OCI indexes have no handler under
 * `/{route}/` at all).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config, IndexConfig } from '../../config/types.js';
import { DiscoveryBuilder, indexApiPath } from '../../discovery/document.js';
import { ORIGIN_HEADERS, type Origin } from '../../discovery/origin.js';
import type { EcosystemDiscovery } from '../../discovery/types.js';

/** The part of an ecosystem discovery needs (structural, so this folder imports nothing of http/). */
export interface DiscoveryParticipant {
  readonly id: string;
  readonly discovery?: EcosystemDiscovery;
}

/** `originOf`: the request's origin, forwarded headers weighed by who sent them (`ServerContext.originOf`). */
export function registerDiscovery(app: FastifyInstance, config: Pick<Config, 'indexes' | 'metrics' | 'mirrors'>, ecosystems: readonly DiscoveryParticipant[], originOf: (request: FastifyRequest) => Origin | null): void {
  const parts = new Map(ecosystems.flatMap((e) => (e.discovery ? [[e.id, e.discovery] as const] : [])));
  const builder = new DiscoveryBuilder(config, parts);
  const answer = (request: FastifyRequest, reply: FastifyReply, only?: IndexConfig) => {
    const origin = originOf(request);
    // The document is built from these headers: a cache must not hand one host's URLs to another.
    reply.header('Vary', ORIGIN_HEADERS);
    return reply.type('application/json').send(builder.document(origin, only));
  };

  app.get('/+api', (request, reply) => answer(request, reply));
  for (const index of builder.indexes) {
    app.get(indexApiPath(index), (request, reply) => answer(request, reply, index));
  }
}
