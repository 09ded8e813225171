/**
 * The admin surfaces (`/+status?details=admin`, the `/admin/status` page): open to anyone while
 * no `[admin] token` is configured, as before (the admin actions, `POST /+admin/...`, are not:
 * `requireForAction`); with one, a request must carry it, either as
 * `Authorization: Bearer <token>` (scripts, curl) or as HTTP Basic with the token as the password
 * and any user name (browsers: the challenge is Basic so that they prompt for it, without any
 * script, and send it again to the same realm). The comparison is constant-time (auth.ts); a
 * refusal goes to the security log with the reason only, never what was sent.
 */
import type { FastifyRequest } from 'fastify';
import type { Secret } from '../config/secret.js';
import { HttpError } from '../http/errors.js';
import { logAuthFailed } from '../observe/security-log.js';
import { parseBasic, sameSecret } from './secrets.js';

export const ADMIN_REALM = 'velodex admin';
export const ADMIN_CHALLENGE = `Basic realm="${ADMIN_REALM}", charset="UTF-8"`;

export type AdminDenial = 'missing-credentials' | 'wrong-credentials';

export const ADMIN_DENIAL_MESSAGES: Record<AdminDenial, string> = {
  'missing-credentials':
    'this needs the admin token ([admin] token in the server config): send Authorization: Bearer <token>, or HTTP Basic credentials with the token as the password',
  'wrong-credentials': 'the admin token is wrong',
};

/** The token a request carries: the Bearer credential, or the Basic password. */
function presented(authorization: string | undefined): string | undefined {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
  return bearer ?? parseBasic(authorization)?.password;
}

/** Whether `authorization` opens the admin surfaces; null when it does (or no token is set). */
export function checkAdmin(token: Secret | undefined, authorization: string | undefined): AdminDenial | null {
  if (!token) return null;
  const given = presented(authorization);
  if (given === undefined) return 'missing-credentials';
  return sameSecret(given, token.reveal()) ? null : 'wrong-credentials';
}

export class AdminGate {
  constructor(
    private readonly token: Secret | undefined,
    private readonly clientAddress: (r: FastifyRequest) => string,
  ) {}

  /** The refusal of `request`, logged, or null when it may see the admin surfaces. */
  refusal(request: FastifyRequest): AdminDenial | null {
    const denial = checkAdmin(this.token, request.headers.authorization);
    // `index` names what was addressed: here the route (`/+status`), as the token realm's lines do.
    if (denial) logAuthFailed(request.log, { index: request.routeOptions.url ?? 'admin', method: request.method, client: this.clientAddress(request), reason: denial });
    return denial;
  }

  /** Throws the 401 (with the Basic challenge) of a request that may not see the admin surfaces. */
  require(request: FastifyRequest): void {
    const denial = this.refusal(request);
    if (denial) throw new HttpError(401, ADMIN_DENIAL_MESSAGES[denial], { 'www-authenticate': ADMIN_CHALLENGE, 'cache-control': 'no-store' });
  }

  /**
   * `require` for an admin action (`POST /+admin/...`: a collection, a retention run), which
   * reads the whole store and changes it. Unlike the pages, an action is never open: with no
   * `[admin] token` set it is refused (403), so an anonymous client cannot start store-wide work
   * on demand; the schedule and the command line still run it.
   */
  requireForAction(request: FastifyRequest): void {
    if (!this.token) throw new HttpError(403, 'admin actions need an admin token: set [admin] token in the server config (or run the velodex command, or let the schedule run it)', { 'cache-control': 'no-store' });
    this.require(request);
  }
}
