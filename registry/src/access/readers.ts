/**
 * Who may read a private index (`read = "token"`, or a virtual index over a private member):
 *
 * - a hosted index's upload token, and any named token of the index (`read`, or `upload` and
 *   `delete`, which imply it); an identity (identities/) the index's rules give any scope;
 * - for a virtual index, besides its own read tokens: a credential that reads every private
 *   member (the team's read token reads the team's view over its private index and PyPI).
 *
 * An open index is read by anyone. As for writes, the password is compared with every candidate
 * secret, in constant time each (tokens.ts).
 */
import type { IndexConfig, IndexToken } from '../config/types.js';
import { digestOf, matches } from './secrets.js';
import { recall } from './identities/remembered.js';
import { expiredMessage, identify, type Credential } from './tokens.js';

export type ReadVerdict = { kind: 'reads' } | { kind: 'expired'; token: IndexToken } | { kind: 'refused' };

const READS: ReadVerdict = { kind: 'reads' };
const REFUSED: ReadVerdict = { kind: 'refused' };

/**
 * Passwords that read an index, and until when (the earliest expiry among the tokens involved):
 * a client sends its credentials with every request, and a check hashes the password. Only
 * passwords that read are kept, by index, at most `MAX_KEPT` each; indexes live as long as the config.
 */
const MAX_KEPT = 1024;
const kept = new WeakMap<IndexConfig, Map<string, number>>();

/** Whether `password` (undefined: none was sent) reads `index`; `byName` finds a virtual index's members. */
export function readVerdict(index: IndexConfig, password: string | undefined, byName: ReadonlyMap<string, IndexConfig>, now: number = Date.now()): ReadVerdict {
  if (!index.private) return READS;
  if (password === undefined) return REFUSED;
  const until = kept.get(index)?.get(password);
  if (until !== undefined && now < until) return READS;
  const verdict = checkedVerdict(index, password, byName, now);
  if (verdict.kind === 'reads') keep(index, password, readsUntil(index, password, byName));
  return verdict;
}

function keep(index: IndexConfig, password: string, until: number): void {
  let passwords = kept.get(index);
  if (!passwords) kept.set(index, (passwords = new Map()));
  if (passwords.size >= MAX_KEPT) passwords.delete(passwords.keys().next().value as string);
  passwords.set(password, until);
}

/** The earliest expiry of the named tokens `password` is, on the index and its members (Infinity: none expires). */
function readsUntil(index: IndexConfig, password: string, byName: ReadonlyMap<string, IndexConfig>): number {
  const indexes = [index, ...(index.role === 'virtual' ? index.members.flatMap((m) => byName.get(m) ?? []) : [])];
  const given = digestOf(password);
  let until = Infinity;
  for (const ix of indexes) for (const t of ix.tokens) if (t.expiresAt && matches(given, t.secret)) until = Math.min(until, t.expiresAt.getTime());
  const identity = recall(password);
  // Until its end, or the moment it must be checked again for a revocation.
  return identity ? Math.min(until, identity.expiresAt, identity.recheckAt ?? Infinity) : until;
}

function checkedVerdict(index: IndexConfig, password: string, byName: ReadonlyMap<string, IndexConfig>, now: number): ReadVerdict {
  const own = ownVerdict(index, password, now);
  if (index.role !== 'virtual' || own.kind === 'reads') return own;
  const privateMembers = index.members.map((m) => byName.get(m)).filter((m): m is IndexConfig => m?.private === true);
  if (privateMembers.length === 0) return own;
  const verdicts = privateMembers.map((m) => ownVerdict(m, password, now));
  if (verdicts.every((v) => v.kind === 'reads')) return READS;
  return own.kind === 'expired' ? own : (verdicts.find((v) => v.kind === 'expired') ?? REFUSED);
}

/**
 * The index's own credentials: its upload token (hosted) and its named tokens, whatever their
 * scopes: `upload` and `delete` imply `read`, since a client that pushes must see what is there
 * (docker asks which layers exist before it uploads any). `projects` globs narrow writes only.
 */
function ownVerdict(index: IndexConfig, password: string, now: number): ReadVerdict {
  const who = identify(index, password, now);
  if (who.kind === 'expired') return { kind: 'expired', token: who.token };
  return who.kind === 'credential' && mayRead(who.credential) ? READS : REFUSED;
}

/** Every token of the index reads it, whatever its scopes; an identity reads where its rules give it any scope. */
export function mayRead(credential: Credential): boolean {
  return credential.kind !== 'identity' || credential.grant.scopes.length > 0;
}

/**
 * The secrets that may read `index`, for what holds only a fingerprint of the one it was given
 * (the OCI realm's bearer tokens): each is checked with `readVerdict` before it counts.
 */
export function readerSecrets(index: IndexConfig, byName: ReadonlyMap<string, IndexConfig>): string[] {
  const of = (ix: IndexConfig) => [...(ix.role === 'hosted' && ix.uploadToken ? [ix.uploadToken.reveal()] : []), ...ix.tokens.map((t) => t.secret.reveal())];
  const members = index.role === 'virtual' ? index.members.flatMap((m) => byName.get(m) ?? []).flatMap(of) : [];
  return [...new Set([...of(index), ...members])];
}

/** What a person reads when a read of a private index is refused. */
export function readRefusalMessage(index: IndexConfig, verdict: Exclude<ReadVerdict, { kind: 'reads' }>, sent: boolean): string {
  if (verdict.kind === 'expired') return expiredMessage(verdict.token);
  const how = 'a token of the index (its upload token, or a named token of it) as the password';
  return sent ? `index "${index.name}" is private and these credentials may not read it: send ${how}` : `index "${index.name}" is private: send HTTP Basic credentials with ${how}`;
}
