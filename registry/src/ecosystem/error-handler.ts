/**
 * The one error-handler factory: the server's own routes (app/error-handler.ts) and each
 * ecosystem (`Ecosystem.answerError`, python/index.ts) build their fastify error handler from
 * their `ErrorShape`, so every surface answers a failure by the same steps:
 *
 * 1. a client that went away gets nothing (499, logged at info: a closed laptop is routine);
 * 2. the ecosystem's own errors (already answers in its shape), then the neutral failures through
 *    its table (`NeutralAnswers`); an answer of 5xx is still logged (warn) with its cause;
 * 3. anything else is fastify's own failure with its 4xx status, or an internal error: 500 that
 *    names the request id, the cause in the log only.
 *
 * What differs between shapes is data: the table, the body, and what happens before an answer
 * leaves (OCI: a refusal sent before its request body was read, oci/refusal.ts).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isClientGone, logClientGone } from '../http/client-gone.js';
import { answerNeutral, type NeutralAnswers } from './answers.js';

export interface ErrorShape<A extends { status: number }> {
  /** The answer to one of the ecosystem's own errors (`HttpError`; OCI's `OciError`), else undefined. */
  own(err: unknown): A | undefined;
  /** The ecosystem's table of the neutral failures. */
  neutral: NeutralAnswers<A>;
  /** Sends an answer in the ecosystem's body shape. */
  send(reply: FastifyReply, answer: A): FastifyReply | Promise<FastifyReply>;
  /** The JSON body of a failure nothing answered: fastify's own (its 4xx status) or internal (500). */
  unanswered(status: number, message: string): object | string;
  /** Awaited before any answer is sent (OCI: read or cut the rest of a body not read to its end). */
  beforeAnswer?(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** The log line's message; `request failed` by default. */
  logLine?: string;
}

export type ErrorHandler = (err: unknown, request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;

export function errorHandler<A extends { status: number }>(shape: ErrorShape<A>): ErrorHandler {
  const line = shape.logLine ?? 'request failed';
  return async (err, request, reply) => {
    if (isClientGone(err, request)) {
      logClientGone(err, request);
      return reply.code(499).send();
    }
    const answer = shape.own(err) ?? answerNeutral(shape.neutral, err);
    if (answer) {
      // A 5xx the server answers on purpose (store or upstream down) still belongs in the log, with its cause.
      if (answer.status >= 500) request.log.warn({ err }, line);
      await shape.beforeAnswer?.(request, reply);
      return shape.send(reply, answer);
    }
    await shape.beforeAnswer?.(request, reply);
    const status = typeof (err as { statusCode?: unknown }).statusCode === 'number' ? (err as { statusCode: number }).statusCode : 500;
    if (status >= 500) {
      request.log.error({ err }, line);
      return reply.code(500).type('application/json').send(shape.unanswered(500, `internal error (request id ${request.id})`));
    }
    return reply.code(status).type('application/json').send(shape.unanswered(status, err instanceof Error ? err.message : 'bad request'));
  };
}
