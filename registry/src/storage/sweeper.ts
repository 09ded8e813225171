/**
 * Runs `Stores.sweep` at start-up and then periodically, on an unref'd timer (it never keeps the
 * process alive). With the s3 backend every process sweeps the shared bucket: that is safe, as a
 * sweep removes only staged writes older than the stale age, and harmless when two overlap (a
 * removal of what another sweep removed already is a no-op). A failed sweep (store down) is
 * reported and the next one tries again.
 */
import type { Stores } from './index.js';

/** An hour: stale staging costs only space, and a listing of the staging prefix per hour is cheap. */
export const SWEEP_EVERY_MS = 60 * 60 * 1000;

export interface SweeperHooks {
  onSwept(removed: number): void;
  onError(err: unknown): void;
}

/** Starts sweeping; returns the function that stops it. */
export function startSweeper(stores: Pick<Stores, 'sweep'>, hooks: SweeperHooks, everyMs = SWEEP_EVERY_MS): () => void {
  let running = false;
  const pass = (): void => {
    // A sweep still listing a large prefix when the next is due: skip this turn.
    if (running) return;
    running = true;
    stores.sweep().then(
      (removed) => {
        running = false;
        hooks.onSwept(removed);
      },
      (err: unknown) => {
        running = false;
        hooks.onError(err);
      },
    );
  };
  pass();
  const timer = setInterval(pass, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
