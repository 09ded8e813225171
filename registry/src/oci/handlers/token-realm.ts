/**
 * The token realm, `GET /v2/token?service=velodex&scope=repository:<name>:pull,push`, in the
 * distribution registry's token protocol. Anyone gets `pull` (reads are open); a caller whose
 * Basic password is a credential of the index a name writes to (a hosted index, or a virtual
 * index's upload target: its upload token, or a named token, access/tokens.ts) also gets the write
 * actions it asked for on that name that the credential may do (`push`: upload; `delete`), and
 * nothing on a name that writes elsewhere. An identity token (access/identities/: a minted upload
 * token, a ServiceAccount token) counts as a credential of the indexes whose rules name it. A password that is a credential of no hosted OCI index
 * is a 401, which is what makes `docker login` with a wrong password fail; a named token past its
 * expiry is a 401 that says so. The answer carries the token twice (`token` and the OAuth2
 * spelling `access_token`), as the spec allows clients to read either.
 */
import { BASIC_CHALLENGE } from '../../access/auth.js';
import { parseBasic } from '../../access/secrets.js';
import { grantOn } from '../../access/identities/grants.js';
import { recall } from '../../access/identities/remembered.js';
import { readVerdict } from '../../access/readers.js';
import { actorOf, expiredMessage, hasScope, identify, reachesName, type Credential, type Identified } from '../../access/tokens.js';
import type { IndexConfig } from '../../config/types.js';
import { logAuthFailed } from '../../observe/security-log.js';
import { writeTarget } from '../../roles/write-target.js';
import { OciError, OciStatusError } from '../model/errors.js';
import { resolveName } from './access.js';
import type { OciExchange, Target } from './exchange.js';
import { TOKEN_PATH } from './token/challenge.js';
import { parseScopes, ScopeError, type Access } from './token/scope.js';
import { identityBinding } from './token/identity-binding.js';
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
  const basic = header === undefined ? null : parseBasic(header);
  let subject = 'anonymous';
  if (header !== undefined) {
    const who = identifyAnywhere(deps.ociIndexes, basic?.password);
    if (who.kind !== 'credential') {
      const expired = who.kind === 'expired' ? who.token : undefined;
      logAuthFailed(request.log, {
        index: TOKEN_PATH,
        method: request.method,
        client: deps.clientAddress(request),
        reason: expired ? 'expired-credentials' : 'wrong-credentials',
        ...(expired ? { token: expired.name } : {}),
      });
      throw new OciError(
        'UNAUTHORIZED',
        expired
          ? expiredMessage(expired)
          : 'the password is not the upload token of any hosted OCI index on this registry, nor a named token of an OCI index: log in with one as the password (any username)',
        { 'WWW-Authenticate': BASIC_CHALLENGE },
      );
    }
    subject = actorOf(who.credential, undefined) ?? 'uploader';
  }
  const bindings: Bindings = {};
  const access = wanted.flatMap((w) => grant(x, w, basic?.password, bindings));
  const issued = await deps.tokens.issue(subject, access, bindings);
  await reply
    .code(200)
    .header('Cache-Control', 'no-store')
    .type('application/json')
    .send(JSON.stringify({ token: issued.token, access_token: issued.token, expires_in: issued.expiresIn, issued_at: issued.issuedAt.toISOString() }));
}

/**
 * Whom `password` identifies on any index of `indexes`: a live credential first, else a
 * token past its expiry, else nobody. Every index is compared (constant time each), so the
 * answer's timing says nothing of which matched.
 */
export function identifyAnywhere(indexes: readonly IndexConfig[], password: string | undefined): Identified {
  if (password === undefined) return { kind: 'unknown' };
  // Named tokens sit on any index (a read token on a private cache), upload tokens on hosted ones.
  const found = indexes.map((ix) => identify(ix, password));
  return found.find((f) => f.kind === 'credential') ?? found.find((f) => f.kind === 'expired') ?? { kind: 'unknown' };
}

/**
 * What of one requested scope is granted (empty: nothing). Only repositories have access rules
 * here. A write request by a credential of the target binds the token to it (`bindings`), granted
 * or not: a grant is checked against it on every write, a refusal names what it lacks.
 */
function grant(x: OciExchange, wanted: Access, password: string | undefined, bindings: Bindings): Access[] {
  if (wanted.type === 'registry' && wanted.name === 'catalog') bindPrivateReads(x, password, bindings);
  if (wanted.type !== 'repository') return [];
  const target = targetOf(x, wanted.name);
  const actions = new Set<string>();
  // A name no OCI index serves: pulling it finds nothing anyway, and no write is granted.
  if (wanted.actions.some((a) => PULL.has(a)) && (!target || mayPull(x, target.index, password, bindings))) actions.add('pull');
  const writes = wanted.actions.includes('*') ? [...WRITE] : wanted.actions.filter((a) => WRITE.has(a));
  const writer = writes.length > 0 && password !== undefined && target ? writerOf(x, target, password) : null;
  if (writer) {
    const allowed = writes.filter((a) => hasScope(writer.credential, a === 'delete' ? 'delete' : 'upload') && reachesName(writer.credential, writer.repo));
    for (const a of allowed) actions.add(a);
    // Bound even when no write was granted: a write refused later can then say what the token lacks.
    bindings[writer.target.name] = writer.binding;
  }
  return actions.size === 0 ? [] : [{ type: 'repository', name: wanted.name, actions: [...actions] }];
}

/** The index and repository a requested name addresses; null for a name no OCI index serves, or outside the grammar. */
function targetOf(x: OciExchange, name: string): Target | null {
  try {
    return resolveName(x.deps.ociIndexes, name.split('/'));
  } catch (err) {
    if (err instanceof OciError) return null;
    throw err;
  }
}

/**
 * Whether a token may pull from `index`: anyone on an open index; on a private one only a
 * password that reads it, which the token is then bound to (read-access.ts checks the binding on
 * every read).
 */
function mayPull(x: OciExchange, index: IndexConfig, password: string | undefined, bindings: Bindings): boolean {
  if (!index.private) return true;
  if (password === undefined || readVerdict(index, password, x.deps.indexByName).kind !== 'reads') return false;
  bindings[index.name] = bindingOf(x, index, password);
  return true;
}

/** What a token `password` got is bound to on `index`: the secret's fingerprint, or the identity it proved. */
function bindingOf(x: OciExchange, index: IndexConfig, password: string): string {
  const identity = recall(password);
  return identity ? identityBinding(grantOn(index, identity)) : x.deps.tokens.bindingOf(password);
}

/** For the catalog: binds the token to every private index the password reads, so their repositories are listed. */
function bindPrivateReads(x: OciExchange, password: string | undefined, bindings: Bindings): void {
  if (password === undefined) return;
  for (const index of x.deps.ociIndexes) {
    if (index.private && readVerdict(index, password, x.deps.indexByName).kind === 'reads') bindings[index.name] = bindingOf(x, index, password);
  }
}

interface Writer {
  target: IndexConfig;
  /** The repository under the index route. */
  repo: string;
  credential: Credential;
  /** What the token is bound to: the credential's fingerprint, or the identity. */
  binding: string;
}

/** The hosted index a write to `addressed` lands in and the live credential of it that `password` is; else null. */
function writerOf(x: OciExchange, addressed: Target, password: string): Writer | null {
  const target = writeTarget(addressed.index, x.deps.indexByName);
  if (!target) return null;
  const who = identify(target, password);
  if (who.kind !== 'credential') return null;
  return { target, repo: addressed.repo.join('/'), credential: who.credential, binding: bindingOf(x, target, password) };
}
