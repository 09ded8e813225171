/**
 * One attempt at one stored delivery, and what follows from it. The attempt first claims the
 * delivery (outbox.ts): when it is not due, or another process holds its lease, nothing is sent
 * and the caller is told when to look again. Then: 2xx deletes the document; a failure records
 * the error and the next attempt time, or gives up and moves it to the dead letters; a shutdown
 * mid-send drops the lease so that another process (or the next start) sends it at once.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { IndexConfig } from '../config/types.js';
import { displayUrl } from '../config/sanitize.js';
import { LEASE_MS, retryDelayMs, shouldGiveUp } from './backoff.js';
import type { Claimed, Outbox } from './outbox.js';
import { sendDelivery } from './send.js';
import { resolveTarget } from './targets.js';

export interface AttemptDeps {
  outbox: Outbox;
  byName: ReadonlyMap<string, IndexConfig>;
  log: FastifyBaseLogger;
  stop: AbortSignal;
  /** This process's name in leases. */
  owner: string;
  /** Other processes share the store, so other owners' leases are live and waited for. */
  shared: boolean;
}

/** Returns when to look again (epoch ms), or undefined when the delivery is finished either way. */
export async function attemptDelivery(id: string, deps: AttemptDeps): Promise<number | undefined> {
  const claim = await deps.outbox.claim(id, deps.owner, Date.now(), LEASE_MS, deps.shared ? 'honour' : 'ignore');
  if (claim.kind === 'gone') return undefined;
  if (claim.kind === 'later') return claim.at;
  return sendClaimed(claim.claimed, deps);
}

async function sendClaimed(claimed: Claimed, { outbox, byName, log, stop }: AttemptDeps): Promise<number | undefined> {
  const d = claimed.delivery;
  const about = { delivery: d.id, event: d.event, index: d.owner };
  const takenOver = () => log.warn(about, 'webhook delivery lease expired before its outcome was stored; another process took it over');
  const target = resolveTarget(d, byName);
  if (!target) {
    if (!(await outbox.bury(claimed, { ...d, lastError: 'target no longer configured' }))) takenOver();
    log.error(about, 'webhook delivery given up: its target is no longer in the config');
    return undefined;
  }
  const url = displayUrl(target.url);
  const outcome = await sendDelivery(target, d, stop);
  if (outcome.kind === 'aborted') {
    // Shutting down: leave it to the others now rather than after the lease.
    await outbox.release(claimed, d).catch(() => false);
    return undefined;
  }
  if (outcome.kind === 'delivered') {
    if (!(await outbox.finish(claimed))) takenOver();
    log.info({ ...about, url, status: outcome.status, attempts: d.attempts + 1 }, 'webhook delivered');
    return undefined;
  }
  const now = Date.now();
  const failed = { ...d, attempts: d.attempts + 1, lastError: outcome.error };
  if (shouldGiveUp(d.createdAt, now)) {
    if (!(await outbox.bury(claimed, failed))) takenOver();
    log.error({ ...about, url, attempts: failed.attempts, error: outcome.error }, 'webhook delivery given up after 24 hours of failures');
    return undefined;
  }
  failed.nextAttemptAt = now + retryDelayMs(failed.attempts);
  if (!(await outbox.release(claimed, failed))) {
    takenOver();
    return undefined;
  }
  log.warn({ ...about, url, attempts: failed.attempts, error: outcome.error, retryAt: new Date(failed.nextAttemptAt).toISOString() }, 'webhook delivery failed; will retry');
  return failed.nextAttemptAt;
}
