/**
 * The credentials an index accepts and what each may do. A hosted index's `upload_token` may do
 * every write to any name, as it always could; a named token (`[[index.token]]`,
 * config/tokens.ts) may do what its scopes say, to the names its `projects` globs match, until it
 * expires. A request names no token: its password is compared with every secret of the index, in
 * constant time each and all of them every time, so neither the answer nor its timing tells which
 * secret came close. Only a named token's name ever leaves this module (the actor `token:<name>`).
 * A password that is none of them may be an identity token verified when the request arrived
 * (identities/): the index's rules say what it may do.
 */
import type { IndexConfig, IndexToken, TokenScope } from '../config/types.js';
import { compileGlob, type Glob } from '../policy/glob.js';
import { grantOn } from './identities/grants.js';
import type { IdentityGrant } from './identities/identity.js';
import { recall } from './identities/remembered.js';
import { digestOf, matches } from './secrets.js';

/** The upload token, a named token, or a verified identity token (a minted upload token, a ServiceAccount's: identities/). */
export type Credential = { kind: 'upload-token' } | { kind: 'named'; token: IndexToken } | { kind: 'identity'; grant: IdentityGrant };

/** Whom `password` identifies on `index`: a credential, a named token past its expiry, or nobody. */
export type Identified = { kind: 'credential'; credential: Credential } | { kind: 'expired'; token: IndexToken } | { kind: 'unknown' };

/** The index's own name normalisation (a Python project name's PEP 503 form), applied to globs and names alike. */
export type Normalize = (name: string) => string;

export function identify(index: IndexConfig, password: string, now: number = Date.now()): Identified {
  let found: Identified = { kind: 'unknown' };
  const given = digestOf(password);
  // Every secret is compared, whatever matched before.
  if (index.role === 'hosted' && index.uploadToken && matches(given, index.uploadToken)) found = { kind: 'credential', credential: { kind: 'upload-token' } };
  for (const token of index.tokens) {
    if (!matches(given, token.secret) || found.kind !== 'unknown') continue;
    found = isExpired(token, now) ? { kind: 'expired', token } : { kind: 'credential', credential: { kind: 'named', token } };
  }
  if (found.kind !== 'unknown') return found;
  // An identity token verified when the request arrived (identities/resolver.ts), still unexpired.
  const identity = recall(password, now);
  return identity ? { kind: 'credential', credential: { kind: 'identity', grant: grantOn(index, identity) } } : found;
}

/** Whether `token` is past its `expires` at `now`. */
export function isExpired(token: IndexToken, now: number = Date.now()): boolean {
  return token.expiresAt !== undefined && now >= token.expiresAt.getTime();
}

/** Whether any credential of `index` could do `scope` (a token past its expiry counts: its holder is told so). */
export function acceptsScope(index: IndexConfig, scope: TokenScope): boolean {
  if (index.role === 'hosted' && (index.uploadToken !== undefined || (scope === 'upload' && index.trustedPublishers.length > 0))) return true;
  return index.tokens.some((t) => t.scopes.includes(scope)) || index.serviceAccounts.some((r) => r.scopes.includes(scope));
}

/** The upload token may do everything on its index (it reads a private one too, readers.ts). */
export function hasScope(credential: Credential, scope: TokenScope): boolean {
  return credential.kind === 'upload-token' || scopesOf(credential).includes(scope);
}

/** What a credential that is not the upload token may do. */
function scopesOf(credential: Exclude<Credential, { kind: 'upload-token' }>): readonly TokenScope[] {
  return credential.kind === 'named' ? credential.token.scopes : credential.grant.scopes;
}

/** The name globs of a credential that is not the upload token; undefined: every name. */
function projectsOf(credential: Exclude<Credential, { kind: 'upload-token' }>): readonly string[] | undefined {
  return credential.kind === 'named' ? credential.token.projects : credential.grant.projects;
}

/** How a message names a credential that is not the upload token: `the token "ci"`, `the service account "ci/builder"`. */
function describe(credential: Exclude<Credential, { kind: 'upload-token' }>): string {
  return credential.kind === 'named' ? `the token "${credential.token.name}"` : credential.grant.described;
}

/** Whether `credential` reaches `name` (the project, or the repository under the index route). */
export function reachesName(credential: Credential, name: string, normalize: Normalize = (n) => n): boolean {
  if (credential.kind === 'upload-token') return true;
  const projects = projectsOf(credential);
  if (projects === undefined) return true;
  const normalized = normalize(name);
  return globsOf(projects, normalize).some((g) => g.test(normalized));
}

/** What the server's logs, webhooks and status call whoever wrote with `credential`. */
export function actorOf(credential: Credential, username: string | undefined): string | undefined {
  return credential.kind === 'upload-token' ? username || undefined : credentialLabel(credential);
}

/** How the audit log names `credential`: `upload_token`, `token:<name>`, or an identity's actor (`publisher:<name>`, `serviceaccount:<ns>/<name>`). */
export function credentialLabel(credential: Credential): string {
  switch (credential.kind) {
    case 'upload-token':
      return 'upload_token';
    case 'named':
      return `token:${credential.token.name}`;
    case 'identity':
      return credential.grant.actor;
  }
}

/** A person's account of what `credential` lacks for `scope` on `name`; null when it lacks nothing. */
export function scopeRefusal(credential: Credential, scope: TokenScope, name: string | undefined, normalize?: Normalize): string | null {
  if (credential.kind === 'upload-token') return null;
  const scopes = scopesOf(credential);
  if (!scopes.includes(scope)) return `${describe(credential)} may not ${VERBS[scope]} (its scopes: ${scopes.join(', ') || 'none on this index'})`;
  if (name !== undefined && !reachesName(credential, name, normalize)) {
    return `${describe(credential)} may not ${VERBS[scope]} "${name}" (its projects: ${projectsOf(credential)!.join(', ')})`;
  }
  return null;
}

export function expiredMessage(token: IndexToken): string {
  return `the token "${token.name}" expired at ${token.expiresAt!.toISOString()}: ask for a new one`;
}

const VERBS: Record<TokenScope, string> = { read: 'read this index', upload: 'upload', delete: 'delete, yank, restore or promote' };

/** Compiled globs per list and normalisation: the lists are the config's (a token's, a rule's), alive as long as it. */
const compiled = new WeakMap<readonly string[], Map<Normalize, Glob[]>>();

function globsOf(projects: readonly string[], normalize: Normalize): Glob[] {
  let byNormalize = compiled.get(projects);
  if (!byNormalize) compiled.set(projects, (byNormalize = new Map()));
  let globs = byNormalize.get(normalize);
  if (!globs) byNormalize.set(normalize, (globs = projects.map((p) => compileGlob(normalize(p)))));
  return globs;
}
