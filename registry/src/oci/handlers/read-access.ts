/**
 * Reads of a private OCI index (access/readers.ts) on `/v2/`. A caller without credentials gets
 * the bearer challenge for `pull` on the name, so docker, crane and containerd fetch a token with
 * the credentials they hold; Basic credentials are checked directly; a bearer token must grant
 * `pull` on the name and be bound to a secret that reads the index still (the realm binds it when
 * it grants a pull there, token-realm.ts), so a token removed from the config stops reading at
 * once. An open index is read by anyone, as before.
 */
import { mayRead, readerSecrets, readRefusalMessage, readVerdict, type ReadVerdict } from '../../access/readers.js';
import { parseBasic } from '../../access/secrets.js';
import type { IndexConfig } from '../../config/types.js';
import { logAuthFailed } from '../../observe/security-log.js';
import { OciError } from '../model/errors.js';
import type { OciDeps } from './deps.js';
import type { OciCall } from './exchange.js';
import { bearerChallenge, realmOf } from './token/challenge.js';
import type { Credentials } from './token/credentials.js';
import type { Access } from './token/scope.js';
import { boundIdentity, isIdentityBinding } from './token/identity-binding.js';
import type { TokenSigner } from './token/tokens.js';

const PULLS = new Set(['pull', '*']);

/** What `credentials` make of a read of `index` (all of it, or `name` in it when given). */
export function readVerdictOf(deps: Pick<OciDeps, 'indexByName' | 'tokens'>, credentials: Credentials, index: IndexConfig, name?: string): ReadVerdict {
  if (!index.private) return { kind: 'reads' };
  switch (credentials.kind) {
    case 'none':
      return { kind: 'refused' };
    case 'basic':
      return readVerdict(index, parseBasic(credentials.header)?.password, deps.indexByName);
    case 'bearer': {
      if (name !== undefined && !grantsPull(credentials.access, name)) return { kind: 'refused' };
      const binding = credentials.bindings[index.name];
      if (binding !== undefined && isIdentityBinding(binding)) {
        const identity = boundIdentity(index, binding);
        return identity && mayRead(identity) ? { kind: 'reads' } : { kind: 'refused' };
      }
      const secret = binding === undefined ? undefined : readersByBinding(deps, index).get(binding);
      return secret === undefined ? { kind: 'refused' } : readVerdict(index, secret, deps.indexByName);
    }
  }
}

/** Throws the 401 of a read of the call's name that its credentials may not make. */
export function authorizeRead(call: OciCall): void {
  const { deps, credentials, request, target: { index, name } } = call;
  if (!index.private) return;
  const verdict = readVerdictOf(deps, credentials, index, name);
  if (verdict.kind === 'reads') return;
  const reason = verdict.kind === 'expired' ? 'expired-credentials' : credentials.kind === 'none' ? 'missing-credentials' : credentials.kind === 'bearer' ? 'insufficient-scope' : 'wrong-credentials';
  logAuthFailed(request.log, {
    index: index.route,
    method: request.method,
    client: deps.clientAddress(request),
    reason,
    ...(verdict.kind === 'expired' ? { token: verdict.token.name } : {}),
  });
  const realm = realmOf(deps.originOf, request);
  throw new OciError(
    'UNAUTHORIZED',
    readRefusalMessage(index, verdict, credentials.kind !== 'none'),
    { 'WWW-Authenticate': bearerChallenge(realm, { scope: `repository:${name}:pull`, ...(credentials.kind === 'bearer' ? { error: 'insufficient_scope' } : {}) }) },
    [{ Type: 'repository', Name: name, Action: 'pull' }],
  );
}

/**
 * The secrets that may read `index`, by their binding under `deps.tokens`' key: a realm token
 * names one by its binding, on every read. The config and the key live as long as the process.
 */
const bindingMaps = new WeakMap<TokenSigner, WeakMap<IndexConfig, Map<string, string>>>();

function readersByBinding(deps: Pick<OciDeps, 'indexByName' | 'tokens'>, index: IndexConfig): Map<string, string> {
  let byIndex = bindingMaps.get(deps.tokens);
  if (!byIndex) bindingMaps.set(deps.tokens, (byIndex = new WeakMap()));
  let map = byIndex.get(index);
  if (!map) byIndex.set(index, (map = new Map(readerSecrets(index, deps.indexByName).map((s) => [deps.tokens.bindingOf(s), s]))));
  return map;
}

function grantsPull(access: readonly Access[], name: string): boolean {
  return access.some((a) => a.type === 'repository' && a.name === name && a.actions.some((x) => PULLS.has(x)));
}
