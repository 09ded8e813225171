/**
 * Write authorisation: HTTP Basic, username ignored, password one of the credentials of the
 * hosted index that receives the write (access/tokens.ts): its upload token, or a named token
 * whose scopes allow the write. Returns a reason and a message rather than a status because the
 * ecosystems map reasons to their own statuses (the Python API answers a read-only index with
 * 405, the OCI API with 403 DENIED).
 */
import type { FastifyRequest } from 'fastify';
import type { HostedIndex, IndexConfig } from '../config/types.js';
import { logAuthFailed, logWriteAccepted } from '../observe/security-log.js';
import { parseBasic } from './secrets.js';
import { acceptsScope, actorOf, expiredMessage, identify, reachesName, scopeRefusal, type Credential, type Normalize } from './tokens.js';

export type WriteDenial = 'read-only' | 'uploads-disabled' | 'missing-credentials' | 'wrong-credentials' | 'expired-credentials' | 'insufficient-scope';
/** What a write needs: `upload`, or `delete` (yank, delete, restore, promote, OCI deletes). */
export type WriteScope = 'upload' | 'delete';

/** A write let through: by whom, and with what it may reach (`reaches`, for a name learnt later). */
export interface WriteGrant {
  target: HostedIndex;
  credential: Credential;
  /** Who wrote, as logs and webhooks name them: `token:<name>`, or the Basic user name of the upload token. */
  actor?: string;
}
/** A refusal; `token` names the named token that was recognised (expired, or short of a scope), `actor` the identity. */
export interface WriteRefusal extends Recognised {
  ok: false;
  reason: WriteDenial;
  message: string;
}

/** Who a refused credential was, for the security log: a named token's name, or an identity's actor label. */
export interface Recognised {
  token?: string;
  actor?: string;
}
export type WriteCheck = ({ ok: true } & WriteGrant) | WriteRefusal;

export interface WriteWant {
  scope: WriteScope;
  /** The project or repository written to, when known before the body is read. */
  name?: string;
  normalize?: Normalize;
  now?: number;
}

export const BASIC_CHALLENGE = 'Basic realm="velodex"';

const MESSAGES: Record<Exclude<WriteDenial, 'expired-credentials' | 'insufficient-scope'>, string> = {
  'read-only': 'this index does not accept writes',
  'uploads-disabled': 'uploads are disabled on this index (no upload token is configured)',
  'missing-credentials': 'authentication required: send HTTP Basic credentials with the upload token (or a token of the index) as the password',
  'wrong-credentials': 'the upload token is wrong',
};

/** The message of a refusal that says nothing of the credentials: a read-only index, uploads disabled. */
export function writeDenialMessage(reason: 'read-only' | 'uploads-disabled'): string {
  return MESSAGES[reason];
}

/** `target` is the index that would receive the write (a virtual index's upload target), or null. */
export function checkWrite(target: IndexConfig | null, authorization: string | undefined, want: WriteWant): WriteCheck {
  const refuse = (reason: WriteDenial, message = MESSAGES[reason as keyof typeof MESSAGES], who: Recognised = {}): WriteRefusal => ({ ok: false, reason, message, ...who });
  if (!target || target.role !== 'hosted') return refuse('read-only');
  if (!acceptsScope(target, want.scope)) {
    const none = !target.uploadToken && target.tokens.length === 0;
    return refuse('uploads-disabled', none ? MESSAGES['uploads-disabled'] : `no token of this index may ${want.scope === 'upload' ? 'upload' : 'delete, yank, restore or promote'}`);
  }
  const creds = parseBasic(authorization);
  if (!creds) return refuse('missing-credentials');
  const who = identify(target, creds.password, want.now);
  if (who.kind === 'unknown') return refuse('wrong-credentials');
  if (who.kind === 'expired') return refuse('expired-credentials', expiredMessage(who.token), { token: who.token.name });
  const refusal = scopeRefusal(who.credential, want.scope, want.name, want.normalize);
  if (refusal) return refuse('insufficient-scope', refusal, recognised(who.credential));
  const actor = actorOf(who.credential, creds.username);
  return { ok: true, target, credential: who.credential, ...(actor !== undefined ? { actor } : {}) };
}

/** The refusal of a grant for `name`, learnt after the check (an upload's project); null when it reaches it. */
export function grantRefusal(grant: WriteGrant, scope: WriteScope, name: string, normalize?: Normalize): WriteRefusal | null {
  if (reachesName(grant.credential, name, normalize)) return null;
  const message = scopeRefusal(grant.credential, scope, name, normalize) ?? `the credentials may not write "${name}"`;
  return { ok: false, reason: 'insufficient-scope', message, ...recognised(grant.credential) };
}

/** How the security log names `credential` when it is refused: never the upload token, which has no name. */
export function recognised(credential: Credential): Recognised {
  if (credential.kind === 'named') return { token: credential.token.name };
  return credential.kind === 'identity' ? { actor: credential.grant.actor } : {};
}

/** Refusals that a client answers by sending other credentials: 401 with the Basic challenge. */
export function isCredentialsDenial(reason: WriteDenial): boolean {
  return reason === 'missing-credentials' || reason === 'wrong-credentials' || reason === 'expired-credentials';
}

/** The audit line of a write `grant` let through (observe/security-log.ts). */
export function noteWrite(request: FastifyRequest, clientAddress: (r: FastifyRequest) => string, index: IndexConfig, credential: string, what: string): void {
  logWriteAccepted(request.log, { index: index.route, method: request.method, client: clientAddress(request), credential, what });
}

/**
 * Writes the security log line of a write refused for its credentials or their scope (nothing for
 * the other refusals: a read-only index is not an authentication failure). `index` is the route addressed.
 */
export function noteWriteDenial(request: FastifyRequest, clientAddress: (r: FastifyRequest) => string, index: IndexConfig, refusal: Pick<WriteRefusal, 'reason' | 'token' | 'actor'>): void {
  const { reason, token, actor } = refusal;
  if (!isCredentialsDenial(reason) && reason !== 'insufficient-scope') return;
  logAuthFailed(request.log, { index: index.route, method: request.method, client: clientAddress(request), reason, ...(token !== undefined ? { token } : {}), ...(actor !== undefined ? { actor } : {}) });
}
