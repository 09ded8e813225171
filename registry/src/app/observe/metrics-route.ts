/**
 * `GET /metrics` (an encapsulated plugin: the route) and the per-request observation behind it
 * (a hook on the root instance, so it sees the /v2/ scope and the index namespace too).
 */
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../../observe/metrics.js';

export function observeRequests(app: FastifyInstance, metrics: Metrics): void {
  // Callback style: no promise per request.
  app.addHook('onResponse', (request, reply, done) => {
    metrics.observeRequest(request.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}

export function metricsRoute(metrics: Metrics) {
  return async (scope: FastifyInstance): Promise<void> => {
    scope.get('/metrics', async (_request, reply) => reply.type(metrics.contentType).send(await metrics.exposition()));
  };
}
