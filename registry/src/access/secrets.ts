/** Reading a Basic credential, and comparing secrets without telling anything by the time it takes. */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Secret } from '../config/secret.js';

export function parseBasic(header: string | undefined): { username: string; password: string } | null {
  if (!header) return null;
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m?.[1]) return null;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Constant-time comparison that does not leak the length of the secret either. */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digestOf(given), digestOf(expected));
}

/**
 * What a presented password is compared by: its SHA-256, equal in length for every password, so
 * `matches` runs in the same time whatever was sent. Computed once per request however many
 * secrets it is compared with.
 */
export function digestOf(given: string): Buffer {
  return createHash('sha256').update(given).digest();
}

/** Configured secrets live as long as the config: each one's digest is computed once. */
const configured = new WeakMap<Secret, Buffer>();

/** Whether `given` (a `digestOf`) is `secret`, in constant time. */
export function matches(given: Buffer, secret: Secret): boolean {
  let expected = configured.get(secret);
  if (!expected) configured.set(secret, (expected = digestOf(secret.reveal())));
  return timingSafeEqual(given, expected);
}
