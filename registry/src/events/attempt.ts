/**
 * One attempt at one stored delivery, and what follows from it: 2xx deletes the document; a
 * failure records the error and the next attempt time, or gives up and moves it to the dead
 * letters; a shutdown mid-send leaves the document as it was, for the next start.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { IndexConfig } from '../config/types.js';
import { sanitizeUrl } from '../config/sanitize.js';
import { retryDelayMs, shouldGiveUp } from './backoff.js';
import type { Outbox } from './outbox.js';
import { sendDelivery } from './send.js';
import { resolveTarget } from './targets.js';

export interface AttemptDeps {
  outbox: Outbox;
  byName: ReadonlyMap<string, IndexConfig>;
  log: FastifyBaseLogger;
  stop: AbortSignal;
}

/** Returns when to try again (epoch ms), or undefined when the delivery is finished either way. */
export async function attemptDelivery(id: string, { outbox, byName, log, stop }: AttemptDeps): Promise<number | undefined> {
  const d = await outbox.get(id);
  if (!d) return undefined;
  const target = resolveTarget(d, byName);
  const about = { delivery: d.id, event: d.event, index: d.owner };
  if (!target) {
    await outbox.bury({ ...d, lastError: 'target no longer configured' });
    log.error(about, 'webhook delivery given up: its target is no longer in the config');
    return undefined;
  }
  const url = sanitizeUrl(target.url);
  const outcome = await sendDelivery(target, d, stop);
  if (outcome.kind === 'aborted') return undefined;
  if (outcome.kind === 'delivered') {
    await outbox.remove(d.id);
    log.info({ ...about, url, status: outcome.status, attempts: d.attempts + 1 }, 'webhook delivered');
    return undefined;
  }
  const now = Date.now();
  const failed = { ...d, attempts: d.attempts + 1, lastError: outcome.error };
  if (shouldGiveUp(d.createdAt, now)) {
    await outbox.bury(failed);
    log.error({ ...about, url, attempts: failed.attempts, error: outcome.error }, 'webhook delivery given up after 24 hours of failures');
    return undefined;
  }
  failed.nextAttemptAt = now + retryDelayMs(failed.attempts);
  await outbox.save(failed);
  log.warn({ ...about, url, attempts: failed.attempts, error: outcome.error, retryAt: new Date(failed.nextAttemptAt).toISOString() }, 'webhook delivery failed; will retry');
  return failed.nextAttemptAt;
}
