/**
 * The credentials an index accepts and what each may do. A hosted index's `upload_token` may do
 * every write to any name, as it always could; a named token (`[[index.token]]`,
 * config/tokens.ts) may do what its scopes say, to the names its `projects` globs match, until it
 * expires. A request names no token: its password is compared with every secret of the index, in
 * constant time each and all of them every time, so neither the answer nor its timing tells which
 * secret came close. Only a named token's name ever leaves this module (the actor `token:<name>`).
 */
import type { IndexConfig, IndexToken, TokenScope } from '../config/types.js';
import { compileGlob, type Glob } from '../policy/glob.js';
import { digestOf, matches } from './secrets.js';

export type Credential = { kind: 'upload-token' } | { kind: 'named'; token: IndexToken };

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
  return found;
}

/** Whether `token` is past its `expires` at `now`. */
export function isExpired(token: IndexToken, now: number = Date.now()): boolean {
  return token.expiresAt !== undefined && now >= token.expiresAt.getTime();
}

/** Whether any credential of `index` could do `scope` (a token past its expiry counts: its holder is told so). */
export function acceptsScope(index: IndexConfig, scope: TokenScope): boolean {
  return (index.role === 'hosted' && index.uploadToken !== undefined) || index.tokens.some((t) => t.scopes.includes(scope));
}

/** The upload token may do everything on its index (it reads a private one too, readers.ts). */
export function hasScope(credential: Credential, scope: TokenScope): boolean {
  return credential.kind === 'upload-token' || credential.token.scopes.includes(scope);
}

/** Whether `credential` reaches `name` (the project, or the repository under the index route). */
export function reachesName(credential: Credential, name: string, normalize: Normalize = (n) => n): boolean {
  if (credential.kind === 'upload-token' || credential.token.projects === undefined) return true;
  const normalized = normalize(name);
  return globsOf(credential.token, normalize).some((g) => g.test(normalized));
}

/** What the server's logs, webhooks and status call whoever wrote with `credential`. */
export function actorOf(credential: Credential, username: string | undefined): string | undefined {
  return credential.kind === 'named' ? `token:${credential.token.name}` : username || undefined;
}

/** How the audit log names `credential`: `upload_token` or `token:<name>`. */
export function credentialLabel(credential: Credential): string {
  return credential.kind === 'named' ? `token:${credential.token.name}` : 'upload_token';
}

/** A person's account of what `credential` lacks for `scope` on `name`; null when it lacks nothing. */
export function scopeRefusal(credential: Credential, scope: TokenScope, name: string | undefined, normalize?: Normalize): string | null {
  if (credential.kind === 'upload-token') return null;
  const { token } = credential;
  if (!token.scopes.includes(scope)) return `the token "${token.name}" may not ${VERBS[scope]} (its scopes: ${token.scopes.join(', ')})`;
  if (name !== undefined && !reachesName(credential, name, normalize)) {
    return `the token "${token.name}" may not ${VERBS[scope]} "${name}" (its projects: ${token.projects!.join(', ')})`;
  }
  return null;
}

export function expiredMessage(token: IndexToken): string {
  return `the token "${token.name}" expired at ${token.expiresAt!.toISOString()}: ask for a new one`;
}

const VERBS: Record<TokenScope, string> = { read: 'read this index', upload: 'upload', delete: 'delete, yank, restore or promote' };

/** Compiled globs per token and normalisation: tokens live as long as the config. */
const compiled = new WeakMap<IndexToken, Map<Normalize, Glob[]>>();

function globsOf(token: IndexToken, normalize: Normalize): Glob[] {
  let byNormalize = compiled.get(token);
  if (!byNormalize) compiled.set(token, (byNormalize = new Map()));
  let globs = byNormalize.get(normalize);
  if (!globs) byNormalize.set(normalize, (globs = (token.projects ?? []).map((p) => compileGlob(normalize(p)))));
  return globs;
}
