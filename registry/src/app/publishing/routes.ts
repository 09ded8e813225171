/**
 * The PyPI-compatible endpoints of trusted publishing, at the server's root where uv and
 * `pypa/gh-action-pypi-publish` look for them (`https://<host>/_/oidc/...`):
 *
 * - `GET /_/oidc/audience`: `{"audience": "..."}`, the audience CI asks its identity token for;
 * - `POST /_/oidc/mint-token` `{"token": "<identity token>"}`: `{"success": true, "token": ...,
 *   "expires": ...}`, or 422 `{"message": "Token request failed", "errors": [{"code",
 *   "description"}]}` as PyPI answers (503 when the issuer's keys cannot be fetched);
 * - `POST /_/oidc/burn-token` `{"token": "<minted token>"}`: revokes a minted token everywhere
 *   (uv calls it once it has published); 202 whatever was sent, as PyPI answers.
 *
 * Both answer 404 when no index has a trusted publisher.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { forget } from '../../access/identities/remembered.js';
import type { TokenExchange } from '../../access/publishing/exchange.js';
import type { PublishTokens } from '../../access/publishing/publish-tokens.js';
import { HttpError } from '../../http/errors.js';
import { readSmallBody } from '../../http/small-body.js';
import { logAuthFailed, logTokenBurnt, logTokenMinted } from '../../observe/security-log.js';

/** An identity token is a few KiB; the request is that and a little JSON. */
const MAX_BODY = 64 * 1024;
const NOT_CONFIGURED = 'trusted publishing is not set up on this registry: no index has a [[index.trusted_publisher]]';

export interface PublishingRouteOptions {
  exchange: TokenExchange;
  tokens: PublishTokens;
  clientAddress: (request: FastifyRequest) => string;
}

export async function publishingRoutes(app: FastifyInstance, { exchange, tokens, clientAddress }: PublishingRouteOptions): Promise<void> {
  app.get('/_/oidc/audience', async () => {
    if (!exchange.configured) throw new HttpError(404, NOT_CONFIGURED);
    return { audience: exchange.audience };
  });

  app.post('/_/oidc/mint-token', async (request, reply) => {
    if (!exchange.configured) throw new HttpError(404, NOT_CONFIGURED);
    const token = tokenOf(await readSmallBody(request.raw, MAX_BODY, 'send {"token": "<identity token>"}'));
    if (token === null) return failed(reply, 422, 'invalid-payload', 'send a JSON body {"token": "<the identity token of the CI job>"}');
    const result = await exchange.mint(token);
    const client = clientAddress(request);
    if (!result.ok) {
      logAuthFailed(request.log, { index: '/_/oidc/mint-token', method: 'POST', client, reason: `trusted-publishing-${result.code}` });
      return failed(reply, result.code === 'unavailable' ? 503 : 422, result.code, result.description);
    }
    for (const grant of result.grants) {
      logTokenMinted(request.log, { client, publisher: grant.publisher, index: grant.index, expiresAt: result.expiresAt });
    }
    return reply.header('cache-control', 'no-store').send({ success: true, token: result.token, expires: result.expiresAt.toISOString() });
  });

  app.post('/_/oidc/burn-token', async (request, reply) => {
    if (!exchange.configured) throw new HttpError(404, NOT_CONFIGURED);
    const token = tokenOf(await readSmallBody(request.raw, MAX_BODY, 'send {"token": "<minted upload token>"}'));
    if (token !== null && (await tokens.burn(token))) {
      forget(token);
      logTokenBurnt(request.log, { client: clientAddress(request) });
    }
    return reply.code(202).header('cache-control', 'no-store').send({ success: true });
  });
}

function tokenOf(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { token?: unknown } | null;
    return typeof parsed?.token === 'string' && parsed.token !== '' ? parsed.token : null;
  } catch {
    return null;
  }
}

function failed(reply: FastifyReply, status: number, code: string, description: string): FastifyReply {
  return reply.code(status).header('cache-control', 'no-store').send({ message: 'Token request failed', errors: [{ code, description }] });
}
