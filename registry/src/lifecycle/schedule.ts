/**
 * Collections on a schedule, in every process: each turn asks for a run, and the lease lets one
 * process at a time through (the others find it busy and wait for their next turn). The first
 * turn comes after a random part of the period (between a half and the whole), so processes
 * started together do not all ask at once. Timers are unref'd: they never keep a process alive.
 */
import type { CollectionReport } from './collect.js';
import { CollectionBusyError, type GarbageCollector } from './collector.js';
import type { UsageLedger } from './usage/ledger.js';

export interface ScheduleHooks {
  onReport(report: CollectionReport): void;
  /** Another process was collecting. */
  onBusy(err: CollectionBusyError): void;
  /** The run failed (the store away, the lease lost): the next turn tries again. */
  onError(err: unknown): void;
}

/** Starts the turns; returns the function that stops them. */
export function scheduleCollections(gc: Pick<GarbageCollector, 'run'>, everyMs: number, hooks: ScheduleHooks): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const next = (delayMs: number): void => {
    if (stopped) return;
    timer = setTimeout(turn, delayMs);
    timer.unref();
  };
  const turn = (): void => {
    gc.run().then(
      (report) => hooks.onReport(report),
      (err: unknown) => (err instanceof CollectionBusyError ? hooks.onBusy(err) : hooks.onError(err)),
    ).finally(() => next(everyMs));
  };
  next(everyMs / 2 + Math.random() * (everyMs / 2));
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/**
 * A store no collection has counted yet (new, or written by an earlier version) shows figures
 * kept by the writes since this version started, not what it holds: shortly after start, one
 * count (a dry run under the lease) records the exact figures. Every process asks once; the
 * lease and the recorded count make the others skip.
 */
export function scheduleFirstCount(gc: Pick<GarbageCollector, 'count'>, usage: Pick<UsageLedger, 'flush' | 'countedAt'>, log: CountLog, delayMs = 5_000 + Math.random() * 10_000): () => void {
  const timer = setTimeout(() => {
    void (async () => {
      await usage.flush();
      if (usage.countedAt !== null) return;
      const report = await gc.count();
      log.info({ event: 'usage_counted', ...report.stored.total }, 'counted what each index holds');
    })().catch((err: unknown) => {
      if (!(err instanceof CollectionBusyError)) log.warn({ err }, 'counting what each index holds failed; the next collection counts');
    });
  }, delayMs);
  timer.unref();
  return () => clearTimeout(timer);
}

interface CountLog {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
}
