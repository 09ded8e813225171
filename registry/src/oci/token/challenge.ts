/**
 * The Bearer challenge that sends clients to the token realm, and the realm's address: the
 * origin the client reached velodex at (as discovery computes it, proxies' forwarded headers
 * included), so a client behind an ingress is sent back through the ingress.
 */
import type { FastifyRequest } from 'fastify';
import { originOf } from '../../discovery/origin.js';
import { SERVICE } from './tokens.js';

export const TOKEN_PATH = '/v2/token';

export function realmOf(request: FastifyRequest): string {
  const origin = originOf(request.headers, request.protocol === 'https' ? 'https' : 'http');
  if (origin) return `${origin.href}${TOKEN_PATH}`;
  // No usable Host header (HTTP/1.0): the address the connection came in on.
  const socket = request.raw.socket;
  const host = socket.localFamily === 'IPv6' ? `[${socket.localAddress ?? '::1'}]` : (socket.localAddress ?? '127.0.0.1');
  return `http://${host}:${socket.localPort ?? 80}${TOKEN_PATH}`;
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
