/**
 * The retry schedule: 1 s after the first failure, doubling, capped at 5 minutes; a delivery
 * still failing 24 hours after it was created is given up (moved to `events/dead/`).
 */
export const INITIAL_DELAY_MS = 1_000;
export const MAX_DELAY_MS = 5 * 60_000;
export const GIVE_UP_AFTER_MS = 24 * 60 * 60_000;
/** Per attempt: connect, send and the response status. */
export const ATTEMPT_TIMEOUT_MS = 10_000;
/**
 * How long a claimed delivery is left to its claimer (outbox.ts): an attempt plus the store
 * writes around it, with room to spare, so a live sender always finishes inside its lease and only
 * a dead one's delivery is taken over. Clocks of the processes must agree to well within the spare.
 */
export const LEASE_MS = 3 * ATTEMPT_TIMEOUT_MS;

/** Delay before the next attempt, after `failures` failed attempts (1, 2, ...). */
export function retryDelayMs(failures: number): number {
  const exponent = Math.min(Math.max(failures - 1, 0), 30);
  return Math.min(INITIAL_DELAY_MS * 2 ** exponent, MAX_DELAY_MS);
}

export function shouldGiveUp(createdAt: number, now: number): boolean {
  return now - createdAt >= GIVE_UP_AFTER_MS;
}
