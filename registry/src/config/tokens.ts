/**
 * `[[index.token]]`: the named tokens of one index, resolved and checked (access/tokens.ts uses
 * them). A token's secret takes the config's three secret forms; its scopes say what it may do;
 * `projects` narrows it to some names; `expires` ends it.
 *
 * `expires` is a TOML offset date-time (`2027-06-30T00:00:00Z`) or date (`2027-06-30`, read as
 * the start of that day in UTC), or the same as a string (what the operator renders). A local
 * date-time has no zone, so no moment: it is refused rather than guessed.
 */
import { ConfigError } from './errors.js';
import { resolveSecret, type SecretSources } from './resolve-secret.js';
import type { TokenFileConfig } from './schema.js';
import type { IndexToken, Role, TokenScope } from './types.js';

/** Scopes only a hosted index can honour: writes land in one (a virtual index's in its upload target). */
const WRITE_SCOPES: readonly TokenScope[] = ['upload', 'delete'];

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const OFFSET_DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

export function resolveTokens(given: readonly TokenFileConfig[] | undefined, where: string, role: Role, secrets: SecretSources): IndexToken[] {
  const seen = new Set<string>();
  return (given ?? []).map((t, i) => {
    const at = `${where}.token[${i}]`;
    if (seen.has(t.name)) throw new ConfigError(`${at}.name`, `"${t.name}" is the name of another token of this index`, 'give each token of an index its own name');
    seen.add(t.name);
    const secret = resolveSecret(t, 'secret', at, secrets);
    if (!secret) throw new ConfigError(`${at}.secret`, 'is missing', 'set secret, secret_env or secret_file');
    const scopes = [...new Set(t.scopes)];
    refuseWriteScopes(scopes, `${at}.scopes`, role, 'token');
    const token: IndexToken = { name: t.name, secret, scopes };
    if (t.projects !== undefined) token.projects = t.projects;
    if (t.expires !== undefined) token.expiresAt = expiryOf(t.expires, `${at}.expires`);
    return token;
  });
}

/**
 * Refuses a write scope on an index that is not hosted: writes land in a hosted index (a virtual
 * index's in its upload target). `grantedTo` names what carries the scopes (a token, a rule).
 */
export function refuseWriteScopes(scopes: readonly TokenScope[], at: string, role: Role, grantedTo: string): void {
  const write = scopes.find((s) => WRITE_SCOPES.includes(s));
  if (write === undefined || role === 'hosted') return;
  throw new ConfigError(
    at,
    `"${write}" needs a hosted index, this one is ${role}`,
    role === 'virtual' ? `writes through a virtual index land in its upload target: give the ${grantedTo} to that hosted index` : 'a cached index takes no writes: keep "read" only',
  );
}

function expiryOf(value: Date | string, where: string): Date {
  const hint = 'use an offset date-time like 2027-06-30T00:00:00Z, or a date like 2027-06-30 (the start of that day in UTC)';
  if (value instanceof Date) {
    // smol-toml's TomlDate: a local date-time (no offset) names no moment.
    const local = value as Date & { isLocal?: () => boolean; isDate?: () => boolean };
    if (local.isLocal?.() && !local.isDate?.()) throw new ConfigError(where, 'is a date-time without an offset', hint);
    return new Date(value.getTime());
  }
  const text = value.trim();
  if (!DATE.test(text) && !OFFSET_DATE_TIME.test(text)) throw new ConfigError(where, `"${value}" is not a date or an offset date-time`, hint);
  const at = new Date(DATE.test(text) ? `${text}T00:00:00Z` : text);
  if (Number.isNaN(at.getTime())) throw new ConfigError(where, `"${value}" is not a valid date`, hint);
  return at;
}
