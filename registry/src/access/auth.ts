/**
 * Write authorisation: HTTP Basic, password = the target hosted index's upload token, username
 * ignored. Returns a reason rather than a status because the ecosystems map reasons to their own
 * statuses (the Python API answers a read-only index with 405, the OCI API with 403 DENIED).
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { IndexConfig } from '../config/types.js';
import { logAuthFailed } from '../observe/security-log.js';

export type WriteDenial = 'read-only' | 'uploads-disabled' | 'missing-credentials' | 'wrong-credentials';
export type WriteCheck = { ok: true; actor: string } | { ok: false; reason: WriteDenial };

export const BASIC_CHALLENGE = 'Basic realm="velodex"';

/** `target` is the index that would receive the write (a virtual index's upload target), or null. */
export function checkWrite(target: IndexConfig | null, authorization: string | undefined): WriteCheck {
  if (!target || target.role !== 'hosted') return { ok: false, reason: 'read-only' };
  const token = target.uploadToken;
  if (!token) return { ok: false, reason: 'uploads-disabled' };
  const creds = parseBasic(authorization);
  if (!creds) return { ok: false, reason: 'missing-credentials' };
  if (!sameSecret(creds.password, token.reveal())) return { ok: false, reason: 'wrong-credentials' };
  return { ok: true, actor: creds.username };
}

export function parseBasic(header: string | undefined): { username: string; password: string } | null {
  if (!header) return null;
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m?.[1]) return null;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Constant-time comparison that does not leak the length of the secret either. */
export function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

export const WRITE_DENIAL_MESSAGES: Record<WriteDenial, string> = {
  'read-only': 'this index does not accept writes',
  'uploads-disabled': 'uploads are disabled on this index (no upload token is configured)',
  'missing-credentials': 'authentication required: send HTTP Basic credentials with the upload token as the password',
  'wrong-credentials': 'the upload token is wrong',
};

/**
 * Writes the security log line of a write refused for its credentials (nothing for the other
 * refusals: a read-only index is not an authentication failure). `index` is the route addressed.
 */
export function noteWriteDenial(request: FastifyRequest, clientAddress: (r: FastifyRequest) => string, index: IndexConfig, reason: WriteDenial): void {
  if (reason !== 'missing-credentials' && reason !== 'wrong-credentials') return;
  logAuthFailed(request.log, { index: index.route, method: request.method, client: clientAddress(request), reason });
}
