/**
 * Tokens that verified, by their exact text, until they expire: clients send the same token with
 * every request, and the synchronous credential checks (access/tokens.ts) look here. Only tokens
 * a verifier accepted get in, so a client cannot fill this memory with made-up ones; it holds at
 * most `MAX_REMEMBERED`, forgetting the oldest first.
 *
 * One memory per process: what a token proved (a ServiceAccount, a minted grant) does not depend
 * on the config, and what it may do is read from the config on every use (grants.ts).
 */
import type { VerifiedIdentity } from './identity.js';

const MAX_REMEMBERED = 4096;
const remembered = new Map<string, Readonly<VerifiedIdentity>>();

export function remember(token: string, identity: VerifiedIdentity): void {
  if (remembered.size >= MAX_REMEMBERED) {
    const now = Date.now();
    for (const [text, id] of remembered) if (endOf(id) <= now) remembered.delete(text);
    if (remembered.size >= MAX_REMEMBERED) remembered.delete(remembered.keys().next().value as string);
  }
  remembered.set(token, Object.freeze(identity));
}

/** What `token` proved, while it has not expired (nor come due for a new check) at `now`. */
export function recall(token: string, now: number = Date.now()): Readonly<VerifiedIdentity> | undefined {
  const found = remembered.get(token);
  if (found && endOf(found) <= now) {
    remembered.delete(token);
    return undefined;
  }
  return found;
}

/** Forgets `token` in this process (it was revoked). */
export function forget(token: string): void {
  remembered.delete(token);
}

function endOf(identity: Readonly<VerifiedIdentity>): number {
  return Math.min(identity.expiresAt, identity.recheckAt ?? Infinity);
}
