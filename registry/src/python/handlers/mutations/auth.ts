/** Write authorisation of the Python write endpoints other than the upload. */
import type { HostedIndex, IndexConfig } from '../../../config/types.js';
import { checkWrite, type WriteGrant } from '../../../access/auth.js';
import type { IndexRequest, ServerContext } from '../../../ecosystem/ecosystem.js';
import { writeTarget } from '../../../roles/write-target.js';
import { normalizeName } from '../../model/records.js';
import { refusedWrite } from '../write-refusal.js';

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
  throw refusedWrite(req.request, access.clientAddress, index, auth);
}
