/** Write authorisation of the Python write endpoints, mapped to the spec's statuses. */
import type { HostedIndex, IndexConfig } from '../../../config/types.js';
import { BASIC_CHALLENGE, checkWrite, isCredentialsDenial, noteWriteDenial, type WriteDenial, type WriteGrant } from '../../../access/auth.js';
import type { IndexRequest, ServerContext } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { writeTarget } from '../../../roles/write-target.js';
import { normalizeName } from '../../model/records.js';

const STATUS: Record<WriteDenial, number> = {
  'read-only': 405,
  'uploads-disabled': 403,
  'missing-credentials': 401,
  'wrong-credentials': 401,
  'expired-credentials': 401,
  'insufficient-scope': 403,
};

/** What a write check reads: the indexes (the write target), the client's address (the security log). */
export type WriteAccess = Pick<ServerContext, 'indexByName' | 'clientAddress'>;

/**
 * The grant of a yank, unyank, delete, restore or promote of `project` through `index`: its
 * hosted write target and who writes (the `delete` scope of a named token), or the 401/403/405
 * that refuses it.
 */
export function authorizeWrite(access: WriteAccess, index: IndexConfig, req: IndexRequest, project: string): WriteGrant & { target: HostedIndex } {
  const auth = checkWrite(writeTarget(index, access.indexByName), req.request.headers.authorization, { scope: 'delete', name: project, normalize: normalizeName });
  if (auth.ok) return auth;
  noteWriteDenial(req.request, access.clientAddress, index, auth);
  const headers: Record<string, string> = isCredentialsDenial(auth.reason) ? { 'www-authenticate': BASIC_CHALLENGE } : {};
  // (`Allow` is set by the dispatcher, which knows the path's routes.)
  throw new HttpError(STATUS[auth.reason], auth.message, headers);
}
