/**
 * The read check of the routes that serve an index's contents outside `/v2/` (the index
 * namespace, `/+stats` of one index): a private index answers 401 with the Basic challenge to a
 * caller without a credential that reads it (readers.ts), and the refusal goes to the security log
 * with its reason only. An open index is read by anyone, without a look at the credentials.
 */
import type { FastifyRequest } from 'fastify';
import type { IndexConfig } from '../config/types.js';
import { HttpError } from '../http/errors.js';
import { logAuthFailed } from '../observe/security-log.js';
import { BASIC_CHALLENGE } from './auth.js';
import { readRefusalMessage, readVerdict } from './readers.js';
import { parseBasic } from './secrets.js';

export class ReadGate {
  constructor(
    private readonly byName: ReadonlyMap<string, IndexConfig>,
    private readonly clientAddress: (r: FastifyRequest) => string,
  ) {}

  /** Whether the request may read `index`, without a refusal (a search leaves out what it may not read). */
  reads(index: IndexConfig, request: FastifyRequest): boolean {
    if (!index.private) return true;
    return readVerdict(index, parseBasic(request.headers.authorization)?.password, this.byName).kind === 'reads';
  }

  /** Throws the 401 (with the Basic challenge) of a request that may not read `index`, logged. */
  require(index: IndexConfig, request: FastifyRequest): void {
    if (!index.private) return;
    const password = parseBasic(request.headers.authorization)?.password;
    const verdict = readVerdict(index, password, this.byName);
    if (verdict.kind === 'reads') return;
    const reason = verdict.kind === 'expired' ? 'expired-credentials' : password === undefined ? 'missing-credentials' : 'wrong-credentials';
    logAuthFailed(request.log, {
      index: index.route,
      method: request.method,
      client: this.clientAddress(request),
      reason,
      ...(verdict.kind === 'expired' ? { token: verdict.token.name } : {}),
    });
    throw new HttpError(401, readRefusalMessage(index, verdict, password !== undefined), { 'www-authenticate': BASIC_CHALLENGE, 'cache-control': 'no-store' });
  }
}
