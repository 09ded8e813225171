/**
 * The Bearer challenge that sends clients to the token realm, and the realm's address: the
 * origin the client reached velodex at (as discovery computes it: a trusted proxy's forwarded
 * headers included, anyone else's ignored), so a client behind an ingress is sent back through
 * the ingress.
 */
import type { FastifyRequest } from 'fastify';
import { localOrigin } from '../../../discovery/origin.js';
import type { OriginOf } from '../../../ecosystem/ecosystem.js';
import { SERVICE } from './tokens.js';

export const TOKEN_PATH = '/v2/token';

export function realmOf(originOf: OriginOf, request: FastifyRequest): string {
  // No usable Host header (HTTP/1.0): the address the connection came in on.
  const origin = originOf(request) ?? localOrigin(request.raw.socket);
  return `${origin.href}${TOKEN_PATH}`;
}

export interface ChallengeOptions {
  /** The scope the request needed (`repository:<name>:pull,push`). */
  scope?: string;
  error?: 'invalid_token' | 'insufficient_scope';
}

/** `Bearer realm="...",service="velodex"[,scope="..."][,error="..."]`; every value is ours, none needs escaping. */
export function bearerChallenge(realm: string, opts: ChallengeOptions = {}): string {
  const params: [string, string | undefined][] = [
    ['realm', realm],
    ['service', SERVICE],
    ['scope', opts.scope],
    ['error', opts.error],
  ];
  return `Bearer ${params
    .filter((p): p is [string, string] => p[1] !== undefined)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',')}`;
}
