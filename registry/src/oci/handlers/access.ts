/**
 * Which index a `<name>` addresses, and whether a write to it is allowed. The longest OCI index
 * route that aligns with whole segments of `<name>` wins; the rest is the repository.
 */
import { BASIC_CHALLENGE, checkWrite, noteWriteDenial, WRITE_DENIAL_MESSAGES, type WriteDenial } from '../../access/auth.js';
import type { HostedIndex, IndexConfig } from '../../config/types.js';
import { resolveRoute } from '../../http/resolve.js';
import { logAuthFailed } from '../../observe/security-log.js';
import { writeTarget } from '../../roles/write-target.js';
import { OciError } from '../model/errors.js';
import { checkName } from '../model/names.js';
import type { OciCall, Target } from './exchange.js';
import { bearerChallenge, realmOf } from './token/challenge.js';
import { checkBearerWrite, writeScope, type BearerCredentials } from './token/credentials.js';

export function resolveName(ociIndexes: readonly IndexConfig[], segments: readonly string[]): Target {
  checkName(segments);
  const hit = resolveRoute(ociIndexes, segments);
  const name = segments.join('/');
  if (!hit) throw new OciError('NAME_UNKNOWN', `no OCI index serves "${name}": names start with an OCI index route`);
  if (hit.rest.length === 0) {
    throw new OciError('NAME_UNKNOWN', `"${name}" is the route of index "${hit.index.name}"; add a repository name after it`);
  }
  return { index: hit.index, repo: hit.rest, name };
}

/**
 * The hosted index that receives a write to the call's name, or an UNAUTHORIZED / DENIED error.
 * Basic credentials are checked against that index's upload token; a bearer token of the realm
 * (already verified) must grant a write on this very name (`authorizeBearer`).
 */
export function authorizeWrite(call: OciCall): HostedIndex {
  const { deps, target: { index }, request, credentials } = call;
  const hosted = writeTarget(index, deps.indexByName);
  if (credentials.kind === 'bearer') return authorizeBearer(call, credentials, hosted);
  const check = checkWrite(hosted, credentials.kind === 'basic' ? credentials.header : undefined);
  if (check.ok && hosted) return hosted;
  const reason = check.ok ? 'read-only' : check.reason;
  noteWriteDenial(request, deps.clientAddress, index, reason);
  if (reason === 'missing-credentials' || reason === 'wrong-credentials') {
    throw new OciError('UNAUTHORIZED', WRITE_DENIAL_MESSAGES[reason], { 'WWW-Authenticate': BASIC_CHALLENGE });
  }
  throw denied(index, reason);
}

/**
 * A write with a bearer token: it must grant a write action on this name (else the challenge for
 * the scope the write needs, `error="insufficient_scope"`) and still be bound to the target's
 * current upload token (else `invalid_token`: it was issued before a rotation).
 */
function authorizeBearer(call: OciCall, token: BearerCredentials, hosted: HostedIndex | null): HostedIndex {
  const { deps, target: { index, name }, request } = call;
  if (!hosted) throw denied(index, 'read-only');
  if (!hosted.uploadToken) throw denied(index, 'uploads-disabled');
  const verdict = checkBearerWrite(token, name, hosted.name, deps.tokens.bindingOf(hosted.uploadToken.reveal()));
  if (verdict === 'ok') return hosted;
  logAuthFailed(request.log, { index: index.route, method: request.method, client: deps.clientAddress(request), reason: verdict });
  const realm = realmOf(deps.originOf, request);
  if (verdict === 'stale-upload-token') {
    throw new OciError('UNAUTHORIZED', `the bearer token was issued for an upload token of index "${hosted.name}" that has changed since: log in again with the current one`, {
      'WWW-Authenticate': bearerChallenge(realm, { error: 'invalid_token' }),
    });
  }
  throw new OciError(
    'UNAUTHORIZED',
    `the bearer token does not allow writes to ${name}: log in with the upload token of index "${hosted.name}" as the password`,
    { 'WWW-Authenticate': bearerChallenge(realm, { scope: writeScope(name, request.method), error: 'insufficient_scope' }) },
    [{ Type: 'repository', Name: name, Action: request.method === 'DELETE' ? 'delete' : 'push' }],
  );
}

function denied(index: IndexConfig, reason: WriteDenial): OciError {
  return new OciError('DENIED', `index "${index.name}": ${WRITE_DENIAL_MESSAGES[reason]}`);
}
