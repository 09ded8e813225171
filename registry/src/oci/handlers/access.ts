/**
 * Which index a `<name>` addresses, and whether a write to it is allowed. The longest OCI index
 * route that aligns with whole segments of `<name>` wins; the rest is the repository.
 */
import { BASIC_CHALLENGE, checkWrite, isCredentialsDenial, noteWriteDenial, recognised as recognisedAs, writeDenialMessage, type Recognised, type WriteScope } from '../../access/auth.js';
import { acceptsScope, credentialLabel, expiredMessage, isExpired, scopeRefusal, type Credential } from '../../access/tokens.js';
import type { HostedIndex, IndexConfig } from '../../config/types.js';
import { resolveRoute } from '../../http/resolve.js';
import { logAuthFailed } from '../../observe/security-log.js';
import { writeTarget } from '../../roles/write-target.js';
import { OciError } from '../model/errors.js';
import { checkName } from '../model/names.js';
import type { OciCall, Target } from './exchange.js';
import { bearerChallenge, realmOf } from './token/challenge.js';
import { grantsWrite, writeScope, type BearerCredentials } from './token/credentials.js';
import { boundIdentity, isIdentityBinding } from './token/identity-binding.js';
import type { TokenSigner } from './token/tokens.js';

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

/** `resolveName` where no index route starts `segments` (or nothing follows it): null. */
export function findName(ociIndexes: readonly IndexConfig[], segments: readonly string[]): Target | null {
  checkName(segments);
  const hit = resolveRoute(ociIndexes, segments);
  return hit && hit.rest.length > 0 ? { index: hit.index, repo: hit.rest, name: segments.join('/') } : null;
}

/** A write let through: the hosted index it lands in, and who writes (for logs and webhooks). */
export interface OciWriteGrant {
  hosted: HostedIndex;
  actor?: string;
  /** The credential, as the audit log names it (`credentialLabel`). */
  credential: string;
}

/** What a write of `method` needs: `delete` for DELETE, `upload` for everything else. */
function scopeOf(method: string): WriteScope {
  return method === 'DELETE' ? 'delete' : 'upload';
}

/** `authorizeWriteBy`, for the writes that need only the hosted index. */
export function authorizeWrite(call: OciCall): HostedIndex {
  return authorizeWriteBy(call).hosted;
}

/**
 * The hosted index that receives a write to the call's name, and who writes; or an UNAUTHORIZED /
 * DENIED error. Basic credentials are checked against that index's credentials (its upload token,
 * its named tokens: access/tokens.ts); a bearer token of the realm (already verified) must grant a
 * write on this very name and still stand for a credential of the index that may do this write
 * (`authorizeBearer`).
 */
export function authorizeWriteBy(call: OciCall): OciWriteGrant {
  const { deps, target: { index, repo }, request, credentials } = call;
  const hosted = writeTarget(index, deps.indexByName);
  const scope = scopeOf(request.method);
  if (credentials.kind === 'bearer') return authorizeBearer(call, credentials, hosted, scope);
  const check = checkWrite(hosted, credentials.kind === 'basic' ? credentials.header : undefined, { scope, name: repo.join('/') });
  if (check.ok) return { hosted: check.target, credential: credentialLabel(check.credential), ...(check.actor !== undefined ? { actor: check.actor } : {}) };
  noteWriteDenial(request, deps.clientAddress, index, check);
  if (isCredentialsDenial(check.reason)) throw new OciError('UNAUTHORIZED', check.message, { 'WWW-Authenticate': BASIC_CHALLENGE });
  throw new OciError('DENIED', `index "${index.name}": ${check.message}`);
}

/**
 * A write with a bearer token: it must grant a write action on this name (else the challenge for
 * the scope the write needs, `error="insufficient_scope"`), and be bound to a credential the
 * target still has (else `invalid_token`: it was issued for a token rotated or removed since),
 * unexpired, whose scopes reach this write (else DENIED).
 */
function authorizeBearer(call: OciCall, token: BearerCredentials, hosted: HostedIndex | null, scope: WriteScope): OciWriteGrant {
  const { deps, target: { index, name, repo }, request } = call;
  if (!hosted) throw denied(index, 'read-only');
  if (!acceptsScope(hosted, scope)) throw denied(index, 'uploads-disabled');
  const log = (reason: string, who: Recognised = {}) => logAuthFailed(request.log, { index: index.route, method: request.method, client: deps.clientAddress(request), reason, ...who });
  const realm = realmOf(deps.originOf, request);
  if (!grantsWrite(token.access, name)) {
    // The realm bound the token to the credential it recognised, if any (token-realm.ts): name it and what it lacks.
    const recognised = boundCredential(hosted, token.bindings[hosted.name], deps.tokens);
    const refusal = recognised && scopeRefusal(recognised, scope, repo.join('/'));
    log('insufficient-scope', recognised && recognisedAs(recognised));
    throw new OciError(
      'UNAUTHORIZED',
      refusal
        ? `index "${index.name}": ${refusal}`
        : `the bearer token does not allow writes to ${name}: log in with the upload token of index "${hosted.name}" (or a token of it that may write here) as the password`,
      { 'WWW-Authenticate': bearerChallenge(realm, { scope: writeScope(name, request.method), error: 'insufficient_scope' }) },
      [{ Type: 'repository', Name: name, Action: request.method === 'DELETE' ? 'delete' : 'push' }],
    );
  }
  const credential = boundCredential(hosted, token.bindings[hosted.name], deps.tokens);
  if (!credential) {
    log('stale-upload-token');
    throw new OciError('UNAUTHORIZED', `the bearer token was issued for a credential of index "${hosted.name}" that has changed or expired since: log in again with a current one`, {
      'WWW-Authenticate': bearerChallenge(realm, { error: 'invalid_token' }),
    });
  }
  if (credential.kind === 'named' && isExpired(credential.token)) {
    log('expired-credentials', { token: credential.token.name });
    throw new OciError('UNAUTHORIZED', expiredMessage(credential.token), { 'WWW-Authenticate': bearerChallenge(realm, { error: 'invalid_token' }) });
  }
  const refusal = scopeRefusal(credential, scope, repo.join('/'));
  if (refusal) {
    log('insufficient-scope', recognisedAs(credential));
    throw new OciError('DENIED', `index "${index.name}": ${refusal}`);
  }
  return { hosted, credential: credentialLabel(credential), ...(credential.kind !== 'upload-token' ? { actor: credentialLabel(credential) } : {}) };
}

/**
 * The credential of `hosted` a realm token was bound to (`bindingOf` its secret, tokens.ts);
 * undefined when none has that fingerprint any more.
 */
export function boundCredential(hosted: HostedIndex, binding: string | undefined, signer: TokenSigner): Credential | undefined {
  if (binding === undefined) return undefined;
  if (isIdentityBinding(binding)) return boundIdentity(hosted, binding);
  if (hosted.uploadToken && signer.bindingOf(hosted.uploadToken.reveal()) === binding) return { kind: 'upload-token' };
  const token = hosted.tokens.find((t) => signer.bindingOf(t.secret.reveal()) === binding);
  return token && { kind: 'named', token };
}

function denied(index: IndexConfig, reason: 'read-only' | 'uploads-disabled'): OciError {
  return new OciError('DENIED', `index "${index.name}": ${writeDenialMessage(reason)}`);
}
