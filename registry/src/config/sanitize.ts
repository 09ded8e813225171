/**
 * How a configured or fetched URL may be shown: on `/+status`, `/+api`, the web UI, in a log line
 * or an error message. Webhook receivers (Slack, Discord, Teams) and some package hosts carry
 * their secret in the path (`https://hooks.slack.com/services/T0/B0/<secret>`), so nothing after
 * the host is shown, only a fingerprint of the whole URL: enough to tell two targets apart and to
 * check which configured URL a line is about, useless to recover the path.
 *
 *  https://hooks.slack.com/services/T0/B0/XXXX  ->  https://hooks.slack.com/...#c1e10ad4
 *  https://pypi.example/                         ->  https://pypi.example/  (nothing hidden)
 *
 * The fingerprint is the first 8 hex digits of the SHA-256 of the URL in its normal form (as
 * `new URL(u).href` writes it): `printf %s "$url" | sha256sum | cut -c1-8` of a URL written
 * that way gives the same. 32 bits cannot recover a secret of any useful length.
 *
 * One rule for every surface, whatever the URL's origin (inline, `_env`, `_file`, an upstream's
 * redirect): the caller never decides what is safe to show.
 */
import { createHash } from 'node:crypto';

export const FINGERPRINT_HEX = 8;

/** Scheme and host (with port) of `raw`, and a fingerprint of the rest when there is a rest. */
export function displayUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return '(invalid URL)';
  }
  // A URL without a host (`file:`, `mailto:`) shows its scheme alone.
  if (u.host === '') return `${u.protocol}...#${urlFingerprint(u.href)}`;
  const origin = `${u.protocol}//${u.host}`;
  const bare = u.pathname === '/' && u.search === '' && u.hash === '' && u.username === '' && u.password === '';
  return bare ? `${origin}/` : `${origin}/...#${urlFingerprint(u.href)}`;
}

/** The fingerprint `displayUrl` appends: the first 8 hex digits of the URL's SHA-256. */
export function urlFingerprint(href: string): string {
  return createHash('sha256').update(href).digest('hex').slice(0, FINGERPRINT_HEX);
}

/**
 * A URL fit to hand on to a client as a link (not to show as a fact about the server): user
 * info, query string and fragment removed, path kept, so the link still leads where it did.
 */
export function urlWithoutCredentials(raw: string): string | null {
  try {
    const u = new URL(raw);
    u.username = '';
    u.password = '';
    u.search = '';
    u.hash = '';
    return u.toString();
  } catch {
    return null;
  }
}
