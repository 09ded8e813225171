/** Write authorisation of the Python write endpoints, mapped to the spec's statuses. */
import type { HostedIndex, IndexConfig } from '../../../config/types.js';
import { BASIC_CHALLENGE, checkWrite, noteWriteDenial, WRITE_DENIAL_MESSAGES, type WriteDenial } from '../../../access/auth.js';
import type { IndexRequest, ServerContext } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { writeTarget } from '../../../roles/write-target.js';

const STATUS: Record<WriteDenial, number> = {
  'read-only': 405,
  'uploads-disabled': 403,
  'missing-credentials': 401,
  'wrong-credentials': 401,
};

/** What a write check reads: the indexes (the write target), the client's address (the security log). */
export type WriteAccess = Pick<ServerContext, 'indexByName' | 'clientAddress'>;

/** The hosted index that receives a write to `index`, or the 401/403/405 that refuses it. */
export function authorizeWrite(access: WriteAccess, index: IndexConfig, req: IndexRequest): HostedIndex {
  const target = writeTarget(index, access.indexByName);
  const auth = checkWrite(target, req.request.headers.authorization);
  if (auth.ok && target) return target;
  const reason = auth.ok ? 'read-only' : auth.reason;
  noteWriteDenial(req.request, access.clientAddress, index, reason);
  const headers: Record<string, string> = STATUS[reason] === 401 ? { 'www-authenticate': BASIC_CHALLENGE } : {};
  // (`Allow` is set by the dispatcher, which knows the path's routes.)
  throw new HttpError(STATUS[reason], WRITE_DENIAL_MESSAGES[reason], headers);
}
