/**
 * Requests served since start, for `/+status`: a total and a count per status class, added in an
 * `onResponse` hook of the root instance (every route, every plugin). Two additions per request.
 */
import type { FastifyInstance } from 'fastify';

export interface RequestSnapshot {
  total: number;
  /** `1xx` .. `5xx`. */
  by_status: Record<string, number>;
}

export class RequestCounters {
  total = 0;
  /** Index = status / 100 (1xx..5xx); 0 for anything else. */
  readonly #byClass = [0, 0, 0, 0, 0, 0];

  count(status: number): void {
    this.total += 1;
    const cls = Math.floor(status / 100);
    this.#byClass[cls >= 1 && cls <= 5 ? cls : 0]! += 1;
  }

  snapshot(): RequestSnapshot {
    const by: Record<string, number> = {};
    for (let c = 1; c <= 5; c++) by[`${c}xx`] = this.#byClass[c]!;
    return { total: this.total, by_status: by };
  }
}

/** Counts every response `app` sends (call on the root instance, before routes are added). */
export function countRequests(app: FastifyInstance): RequestCounters {
  const counters = new RequestCounters();
  // Callback style: no promise per request.
  app.addHook('onResponse', (_request, reply, done) => {
    counters.count(reply.statusCode);
    done();
  });
  return counters;
}
