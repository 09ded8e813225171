/**
 * Retention runs, ecosystem-neutral: what a run reports, and the runner that asks every
 * ecosystem that has retention rules (`RetentionSource`, given through `Ecosystem.retention`) to
 * apply them, one run at a time across processes (`Exclusive`), counting what went per index for
 * the metrics and logging one line per run. What a rule means (tags, untagged items, what keeps
 * what) is the ecosystem's; the runner only runs it.
 *
 * A dry run computes the same plan and changes nothing; it takes no lease, so it may run while
 * a real run is under way (and then shows what is left for the next one).
 */
import type { Exclusive } from './exclusive.js';

/** A tag a run removes (or would). */
export interface UntagEntry {
  tag: string;
  /** The item it named: `sha256:<hex>`. */
  digest: string;
  /** The rule, as the config spells it. */
  rule: string;
}

/** An item a run deletes (or would). */
export interface DeleteEntry {
  digest: string;
  /** The tags the same run removed from it first. */
  tags: string[];
  /** Seconds since it was pushed (or first seen by a run). */
  ageSecs: number;
  rule: string;
}

/** A planned change that did not happen, because the repository changed since the plan. */
export interface SkipEntry {
  digest: string;
  tag?: string;
  reason: string;
}

export interface RepositoryRetention {
  repository: string;
  untagged: UntagEntry[];
  deleted: DeleteEntry[];
  /** Only in a real run, only when something changed under it. */
  skipped?: SkipEntry[];
}

export interface IndexRetention {
  /** The index name. */
  index: string;
  /** The repositories a run changes (or would); those it leaves alone are not listed. */
  repositories: RepositoryRetention[];
}

export interface RetentionReport {
  dryRun: boolean;
  startedAt: string;
  finishedAt: string;
  indexes: IndexRetention[];
}

/** What an ecosystem gives the runner: its indexes' rules, applied (or only planned). */
export interface RetentionSource {
  /** Whether any of its indexes has rules. */
  readonly active: boolean;
  run(opts: { dryRun: boolean; now: Date }): Promise<IndexRetention[]>;
}

/** Deleted items and removed tags per index name, since the process started (the metrics read them). */
export class RetentionCounters {
  readonly #byIndex = new Map<string, { deleted: number; untagged: number }>();

  add(index: string, deleted: number, untagged: number): void {
    const c = this.of(index);
    c.deleted += deleted;
    c.untagged += untagged;
  }

  of(index: string): { deleted: number; untagged: number } {
    let c = this.#byIndex.get(index);
    if (!c) {
      c = { deleted: 0, untagged: 0 };
      this.#byIndex.set(index, c);
    }
    return c;
  }
}

type Log = { info(obj: object, msg: string): void };

/** The lease name of retention runs (lifecycle/exclusive.ts). */
export const RETENTION_LEASE = 'retention';

export class RetentionRunner {
  constructor(
    private readonly deps: {
      sources: readonly RetentionSource[];
      exclusive: Exclusive;
      counters: RetentionCounters;
      log: Log;
    },
  ) {}

  /** Whether any index has rules to run. */
  get active(): boolean {
    return this.deps.sources.some((s) => s.active);
  }

  /** A run (or a dry run); 'busy' when another process's real run holds the lease. */
  async run(opts: { dryRun: boolean; trigger: string }): Promise<RetentionReport | 'busy'> {
    const go = () => this.#run(opts.dryRun, opts.trigger);
    return opts.dryRun ? go() : this.deps.exclusive.runExclusive(RETENTION_LEASE, go);
  }

  async #run(dryRun: boolean, trigger: string): Promise<RetentionReport> {
    const started = new Date();
    const indexes: IndexRetention[] = [];
    for (const source of this.deps.sources) if (source.active) indexes.push(...(await source.run({ dryRun, now: started })));
    const report: RetentionReport = { dryRun, startedAt: started.toISOString(), finishedAt: new Date().toISOString(), indexes };
    const totals = indexes.map((ix) => ({ index: ix.index, ...countsOf(ix) }));
    if (!dryRun) for (const t of totals) this.deps.counters.add(t.index, t.deleted, t.untagged);
    this.deps.log.info(
      {
        event: 'retention',
        dryRun,
        trigger,
        ms: Date.parse(report.finishedAt) - started.getTime(),
        deleted: totals.reduce((n, t) => n + t.deleted, 0),
        untagged: totals.reduce((n, t) => n + t.untagged, 0),
        indexes: Object.fromEntries(totals.map((t) => [t.index, { deleted: t.deleted, untagged: t.untagged, skipped: t.skipped }])),
      },
      dryRun ? 'retention dry run: nothing changed' : 'retention run finished',
    );
    return report;
  }
}

/** What one index's part of a report adds up to. */
export function countsOf(ix: IndexRetention): { deleted: number; untagged: number; skipped: number } {
  let deleted = 0;
  let untagged = 0;
  let skipped = 0;
  for (const r of ix.repositories) {
    deleted += r.deleted.length;
    untagged += r.untagged.length;
    skipped += r.skipped?.length ?? 0;
  }
  return { deleted, untagged, skipped };
}
