/**
 * `[retention] every`: retention runs by themselves. Every process of the server (every worker,
 * every replica) keeps the schedule; the store decides who runs. Each process looks every
 * `CHECK_MS` (or every `every`, when shorter) at when the last run finished
 * (`lifecycle/retention/last`, written by whichever process ran it), and once `every` has passed
 * it starts a run under the retention lease (exclusive.ts): one process runs it, the others find
 * the lease taken (busy) or, after it, the new finish time. A process that starts does not run
 * at once when another ran recently, and a restarted fleet keeps the rhythm.
 */
import type { MetaStore } from '../storage/types.js';
import type { RetentionRunner } from './retention.js';

/** How often a process looks whether a run is due (at most). */
const CHECK_MS = 60_000;
const LAST_KEY = 'lifecycle/retention/last';

interface LastRun {
  /** Epoch ms. */
  finishedAt: number;
}

type Log = { warn(obj: object, msg: string): void; debug(obj: object, msg: string): void };

/** Starts the schedule; the returned function stops it (a run under way finishes). */
export function scheduleRetention(runner: RetentionRunner, meta: MetaStore, everySecs: number, log: Log): () => void {
  const everyMs = everySecs * 1000;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const due = async (): Promise<boolean> => {
    const last = await meta.get<LastRun>(LAST_KEY);
    return !last || Date.now() - last.doc.finishedAt >= everyMs;
  };
  const tick = async () => {
    if (!(await due())) return;
    const result = await runner.run({ dryRun: false, trigger: 'schedule' });
    if (result === 'busy') {
      log.debug({ event: 'retention' }, 'retention: another process is running it');
      return;
    }
    await meta.put<LastRun>(LAST_KEY, { finishedAt: Date.parse(result.finishedAt) });
  };
  const arm = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      tick()
        .catch((err: unknown) => log.warn({ event: 'retention', err: err instanceof Error ? err.message : String(err) }, 'retention run failed; the next one tries again'))
        .finally(arm);
    }, Math.min(everyMs, CHECK_MS));
    timer.unref();
  };
  arm();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
