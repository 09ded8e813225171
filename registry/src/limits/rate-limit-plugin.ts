/**
 * The rate limiter on the request path: an `onRequest` hook, which runs before fastify parses a
 * body, before any handler reads multipart parts, cache state or an upstream. The hook is added
 * to the root instance (not an encapsulated child) so it covers every route, `/v2/` included; the
 * caller installs it only when `[rate_limit] enabled = true`, so a disabled limiter costs nothing.
 *
 * It names no ecosystem: `classify` says which class a request spends (and may shape the 429
 * body the way its API answers errors), `clientAddress` whose budget it is.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RateClassName } from '../config/types.js';
import { settleUnreadBody } from '../http/discard-body.js';
import { errorBody } from '../http/errors.js';
import { logRateLimited } from '../observe/security-log.js';
import type { RateLimiter } from './rate-limiter.js';

export interface Classification {
  class: RateClassName;
  /** The index route the request is under, for the security log. */
  index?: string;
  /** The 429 body in the route's own error shape; default `{statusCode, error, message}`. */
  body?: (message: string) => string | object;
}

/** null: the request is never limited (health checks). */
export type Classify = (request: FastifyRequest) => Classification | null;

export interface RateLimitOptions {
  limiter: RateLimiter;
  classify: Classify;
  clientAddress: (request: FastifyRequest) => string;
}

/**
 * A denied request's body: a small one (a manifest, a JSON document) that arrives at once is read
 * to its end before the answer, so a client that writes everything before it reads (containerd)
 * sees the 429 on a connection it can reuse. A larger or a slow one (an upload, a stalled client)
 * is answered at once, the connection closes after the answer, and what the client still sends
 * is dropped within a small bound (`settleUnreadBody`).
 */
const READ_BEFORE_ANSWER_BYTES = 64 * 1024;

export function installRateLimit(app: FastifyInstance, opts: RateLimitOptions): void {
  // Callback style: an allowed request (nearly all of them) costs no promise.
  app.addHook('onRequest', (request, reply, done) => {
    const c = opts.classify(request);
    if (!c) return done();
    const client = opts.clientAddress(request);
    const decision = opts.limiter.take(c.class, client);
    if (decision.allowed) return done();
    const retryAfterSecs = decision.retryAfterSecs;
    logRateLimited(request.log, { class: c.class, index: c.index, client, retryAfterSecs });
    const message = `rate limit exceeded for ${c.class} requests; retry in ${retryAfterSecs} s`;
    settleUnreadBody(request, reply, READ_BEFORE_ANSWER_BYTES).then(
      () => reply.code(429).header('retry-after', String(retryAfterSecs)).type('application/json').send(c.body ? c.body(message) : errorBody(429, message)),
      (err: unknown) => done(err instanceof Error ? err : new Error(String(err))),
    );
  });
}
