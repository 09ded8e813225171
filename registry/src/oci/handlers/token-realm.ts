/**
 * The token realm, `GET /v2/token?service=velodex&scope=repository:<name>:pull,push`, in the
 * distribution registry's token protocol. Anyone gets `pull` (reads are open); a caller whose
 * Basic password is the upload token of the index a name writes to (a hosted index, or a virtual
 * index's upload target) also gets the write actions it asked for on that name, and nothing on a
 * name that writes elsewhere. A password that is the upload token of no hosted OCI index is a 401,
 * which is what makes `docker login` with a wrong password fail. The answer carries the token
 * twice (`token` and the OAuth2 spelling `access_token`), as the spec allows clients to read either.
 */
import { BASIC_CHALLENGE, checkWrite } from '../../access/auth.js';
import type { HostedIndex, IndexConfig } from '../../config/types.js';
import { logAuthFailed } from '../../observe/security-log.js';
import { writeTarget } from '../../roles/write-target.js';
import { OciError, OciStatusError } from '../model/errors.js';
import { resolveName } from './access.js';
import type { OciExchange } from './exchange.js';
import { TOKEN_PATH } from './token/challenge.js';
import { parseScopes, ScopeError, type Access } from './token/scope.js';
import { SERVICE, type Bindings } from './token/tokens.js';

const PULL = new Set(['pull', '*']);
const WRITE = new Set(['push', 'delete']);

export async function issueToken(x: OciExchange): Promise<void> {
  const { deps, query, request, reply } = x;
  const service = query.get('service');
  if (service !== null && service !== SERVICE) {
    throw new OciStatusError(400, 'REQUEST_INVALID', `this realm issues tokens for service "${SERVICE}", not "${service}"`);
  }
  let wanted: Access[];
  try {
    wanted = parseScopes(query.getAll('scope'));
  } catch (err) {
    if (err instanceof ScopeError) throw new OciStatusError(400, 'REQUEST_INVALID', err.message);
    throw err;
  }
  const header = request.headers.authorization;
  if (header !== undefined && !/^Basic\s/i.test(header)) {
    throw new OciError('UNAUTHORIZED', 'the token realm takes HTTP Basic credentials (an upload token as the password) or none', { 'WWW-Authenticate': BASIC_CHALLENGE });
  }
  if (header !== undefined && !isUploadToken(deps.ociIndexes, header)) {
    logAuthFailed(request.log, { index: TOKEN_PATH, method: request.method, client: deps.clientAddress(request), reason: 'wrong-credentials' });
    throw new OciError(
      'UNAUTHORIZED',
      'the password is not the upload token of any hosted OCI index on this registry: log in with an index\'s upload token as the password (any username)',
      { 'WWW-Authenticate': BASIC_CHALLENGE },
    );
  }
  const bindings: Bindings = {};
  const access = wanted.flatMap((w) => grant(x, w, header, bindings));
  const issued = await deps.tokens.issue(header === undefined ? 'anonymous' : 'uploader', access, bindings);
  await reply
    .code(200)
    .header('Cache-Control', 'no-store')
    .type('application/json')
    .send(JSON.stringify({ token: issued.token, access_token: issued.token, expires_in: issued.expiresIn, issued_at: issued.issuedAt.toISOString() }));
}

/** Whether the Basic password in `header` is the upload token of one of the hosted `indexes`. */
export function isUploadToken(indexes: readonly IndexConfig[], header: string): boolean {
  // Every index is compared (constant time each), so the answer's timing says nothing of which matched.
  return indexes.map((ix) => ix.role === 'hosted' && checkWrite(ix, header).ok).includes(true);
}

/**
 * What of one requested scope is granted (empty: nothing). Only repositories have access rules
 * here. A write grant binds the token to the upload token it was granted for (`bindings`).
 */
function grant(x: OciExchange, wanted: Access, header: string | undefined, bindings: Bindings): Access[] {
  if (wanted.type !== 'repository') return [];
  const actions = new Set<string>();
  if (wanted.actions.some((a) => PULL.has(a))) actions.add('pull');
  const writes = wanted.actions.includes('*') ? [...WRITE] : wanted.actions.filter((a) => WRITE.has(a));
  const target = writes.length > 0 && header !== undefined ? writableBy(x, wanted.name, header) : null;
  if (target?.uploadToken) {
    for (const a of writes) actions.add(a);
    bindings[target.name] = x.deps.tokens.bindingOf(target.uploadToken.reveal());
  }
  return actions.size === 0 ? [] : [{ type: 'repository', name: wanted.name, actions: [...actions] }];
}

/** The hosted index a write to `name` lands in, when `header` carries its upload token; else null. */
function writableBy(x: OciExchange, name: string, header: string): HostedIndex | null {
  let index: IndexConfig;
  try {
    index = resolveName(x.deps.ociIndexes, name.split('/')).index;
  } catch (err) {
    // A name no OCI index serves, or outside the grammar: the write would fail anyway.
    if (err instanceof OciError) return null;
    throw err;
  }
  const target = writeTarget(index, x.deps.indexByName);
  return checkWrite(target, header).ok ? target : null;
}
