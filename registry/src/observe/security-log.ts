/**
 * The security log: one JSON line at `warn` per rate-limit denial, per failed authentication and
 * per connection cut or refused for its client's behaviour (a stalled body, headers that never
 * finished, too many connections from one address), with `event` set so a log pipeline can pick
 * them out. The fields are chosen, not copied from
 * the request: no header, no URL query, no credential ever goes in. The Basic username is left
 * out too: velodex ignores it, and a user who swapped the fields would have put the token there.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { RateClassName } from '../config/types.js';

export interface RateLimitEvent {
  class: RateClassName;
  /** The index route, when the request is under one. */
  index?: string;
  client: string;
  retryAfterSecs: number;
}

export function logRateLimited(log: FastifyBaseLogger, e: RateLimitEvent): void {
  log.warn(
    { event: 'rate_limit', class: e.class, ...(e.index !== undefined ? { index: e.index } : {}), client: e.client, retry_after: e.retryAfterSecs },
    `rate limit: ${e.class} requests from ${e.client} denied; retry in ${e.retryAfterSecs} s`,
  );
}

export interface AuthFailedEvent {
  /** The route of the index the request addressed, or the server's own path (`/v2/token`, `/+status`). */
  index: string;
  method: string;
  client: string;
  /** `missing-credentials`, `wrong-credentials`, `expired-credentials`, `insufficient-scope`...: never what was sent. */
  reason: string;
  /** The named token that was recognised (expired, or short of a scope): its name, never its secret. */
  token?: string;
  /** The identity that was recognised (`serviceaccount:<ns>/<name>`, `publisher:<name>`) and was short of a scope. */
  actor?: string;
}

export function logAuthFailed(log: FastifyBaseLogger, e: AuthFailedEvent): void {
  log.warn(
    { event: 'auth_failed', index: e.index, method: e.method, client: e.client, reason: e.reason, ...(e.token !== undefined ? { token: e.token } : {}), ...(e.actor !== undefined ? { actor: e.actor } : {}) },
    `authentication failed: ${e.method} on ${e.index} from ${e.client} (${e.reason})`,
  );
}

export interface IdentityRejectedEvent {
  /** The path the request addressed (no query). */
  path: string;
  method: string;
  client: string;
  /** Which verifier refused it: `trusted publishing`, `service accounts`. */
  by: string;
  /** `expired`, `wrong-audience`, `bad-signature`, `unavailable`...; never the token. */
  reason: string;
  /** What went wrong, for a person; it quotes no part of the token. */
  message: string;
}

/** A request's identity token (a ServiceAccount token, a minted upload token) that did not verify. */
export function logIdentityRejected(log: FastifyBaseLogger, e: IdentityRejectedEvent): void {
  log.warn(
    { event: 'identity_rejected', path: e.path, method: e.method, client: e.client, by: e.by, reason: e.reason },
    `identity token refused by ${e.by}: ${e.message} (${e.method} ${e.path} from ${e.client})`,
  );
}

export interface TokenMintedEvent {
  client: string;
  /** The trusted publisher whose rules the identity token matched, and the index it now uploads to. */
  publisher: string;
  index: string;
  expiresAt: Date;
}

/** The audit line of an upload token minted for a trusted publisher, at `info`. */
export function logTokenMinted(log: FastifyBaseLogger, e: TokenMintedEvent): void {
  log.info(
    { event: 'token_minted', client: e.client, publisher: e.publisher, index: e.index, expires: e.expiresAt.toISOString() },
    `trusted publishing: minted an upload token of index ${e.index} for publisher ${e.publisher}, from ${e.client}`,
  );
}

/** The audit line of a minted upload token its holder burnt (revoked), at `info`. */
export function logTokenBurnt(log: FastifyBaseLogger, e: { client: string }): void {
  log.info({ event: 'token_burnt', client: e.client }, `trusted publishing: a minted upload token was burnt by ${e.client}`);
}

export interface WriteAcceptedEvent {
  /** The route of the index the request addressed. */
  index: string;
  method: string;
  client: string;
  /** Which credential wrote: `upload_token` or `token:<name>`; never a secret, nor the Basic user name. */
  credential: string;
  /** What was written, for a person: `upload alpha-1.0.tar.gz`, `yank alpha 1.0`, `push app:v1`. */
  what: string;
}

/** The audit line of a write that was let through, at `info`: who wrote what, from where. */
export function logWriteAccepted(log: FastifyBaseLogger, e: WriteAcceptedEvent): void {
  log.info(
    { event: 'write', index: e.index, method: e.method, client: e.client, credential: e.credential, what: e.what },
    `write: ${e.what} on ${e.index} from ${e.client} with ${e.credential}`,
  );
}

/** `headers_timeout`: the request head did not finish in time; `body_stalled`: the body stopped arriving. */
export type CutReason = 'headers_timeout' | 'body_stalled';

export interface ConnectionCutEvent {
  reason: CutReason;
  client: string;
  /** The request's method, once its head was read. */
  method?: string;
  /** The bound the client passed (`[connections]`), in seconds. */
  afterSecs: number;
}

const CUT_TEXT: Record<CutReason, string> = {
  headers_timeout: 'the request headers did not finish within',
  body_stalled: 'the request body sent nothing for',
};

export function logConnectionCut(log: FastifyBaseLogger, e: ConnectionCutEvent): void {
  log.warn(
    { event: 'connection_cut', reason: e.reason, client: e.client, ...(e.method !== undefined ? { method: e.method } : {}), after_secs: e.afterSecs },
    `connection from ${e.client} cut: ${CUT_TEXT[e.reason]} ${e.afterSecs} s`,
  );
}

export interface ConnectionRefusedEvent {
  client: string;
  /** `[connections] max_per_client`: the connections the client already holds. */
  limit: number;
}

export function logConnectionRefused(log: FastifyBaseLogger, e: ConnectionRefusedEvent): void {
  log.warn(
    { event: 'connection_refused', reason: 'too_many_connections', client: e.client, limit: e.limit },
    `connection from ${e.client} refused: it already holds ${e.limit} (connections.max_per_client)`,
  );
}
