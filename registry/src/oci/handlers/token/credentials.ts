/**
 * What a `/v2/` request presents in `Authorization`: nothing, Basic credentials (checked where a
 * write needs them, as before the token realm existed), or a bearer token of the realm. A bearer
 * token is verified on every route, reads included: an expired or forged one is refused with a
 * challenge that says so (`error="invalid_token"`), and the client fetches a new one.
 */
import type { FastifyRequest } from 'fastify';
import type { OriginOf } from '../../../ecosystem/ecosystem.js';
import { OciError } from '../../model/errors.js';
import { bearerChallenge, realmOf } from './challenge.js';
import type { Access } from './scope.js';
import { REJECTION_MESSAGES, type Bindings, type TokenSigner } from './tokens.js';

export interface BearerCredentials {
  kind: 'bearer';
  /** Whom the realm issued it to: `anonymous`, `uploader` (an upload token), or `token:<name>`. */
  subject: string;
  access: Access[];
  bindings: Bindings;
}

export type Credentials =
  | { kind: 'none' }
  /** Any other scheme as well: the Basic check refuses what it cannot parse. */
  | { kind: 'basic'; header: string }
  | BearerCredentials;

const BEARER = /^Bearer\s+(\S*)\s*$/i;

/** `originOf`: where the realm of a challenge points (`realmOf`). */
export async function readCredentials(request: FastifyRequest, signer: TokenSigner, originOf: OriginOf): Promise<Credentials> {
  const header = request.headers.authorization;
  if (header === undefined || header === '') return { kind: 'none' };
  const bearer = BEARER.exec(header);
  if (!bearer) return { kind: 'basic', header };
  const verified = await signer.verify(bearer[1] ?? '');
  if (verified.ok) return { kind: 'bearer', subject: verified.subject, access: verified.access, bindings: verified.bindings };
  throw new OciError('UNAUTHORIZED', REJECTION_MESSAGES[verified.reason], {
    'WWW-Authenticate': bearerChallenge(realmOf(originOf, request), { error: 'invalid_token' }),
  });
}

/** The scope a write verb asks for in a challenge: `delete` for DELETE (as distribution does), else `pull,push`. */
export function writeScope(name: string, method: string): string {
  return `repository:${name}:${method === 'DELETE' ? 'delete' : 'pull,push'}`;
}

/**
 * Any write action the realm granted on the name lets a write through here; what the credential
 * behind the token may do (upload, delete, which repositories) is checked again on every write
 * (access.ts), so a token outlives no change of it.
 */
const WRITE_ACTIONS = new Set(['push', 'delete', '*']);

export function grantsWrite(access: readonly Access[], name: string): boolean {
  return access.some((a) => a.type === 'repository' && a.name === name && a.actions.some((x) => WRITE_ACTIONS.has(x)));
}
