/**
 * The usage counters of `/+stats`, per index route, kept in process memory. Increments are plain
 * additions on a preallocated record (no allocation, no I/O on the request path); readers take a
 * snapshot. Counters reset on restart, as the spec says.
 */
import { ProjectCounters, type ProjectCountersDump } from './project-counters.js';

export const USAGE_COUNTERS = [
  'pages',
  'downloads',
  'metadata',
  'uploads',
  'bytes',
  'refreshes',
  'changed',
  'stale_served',
  'upstream_errors',
  'rejected',
  'quota_refused',
  'evicted',
  'evicted_bytes',
  'kept_after_upstream_delete',
] as const;

export type UsageCounter = (typeof USAGE_COUNTERS)[number];
export type CounterValues = Record<UsageCounter, number>;

/**
 * What the neutral machinery needs: somewhere to count. `project` and `file`, when the caller
 * knows them, also count the project (and, for downloads, metadata and bytes, the file) of the
 * per-project drill-down of `/+stats` (project-counters.ts). Positional, so a call allocates nothing.
 */
export interface CounterSink {
  add(name: UsageCounter, n?: number, project?: string, file?: string): void;
}

export function zeroes(): CounterValues {
  return Object.fromEntries(USAGE_COUNTERS.map((n) => [n, 0])) as CounterValues;
}

export class IndexCounters implements CounterSink {
  readonly #values: CounterValues = zeroes();
  /** Per project and file, bounded (see project-counters.ts). */
  readonly projects = new ProjectCounters(zeroes);

  constructor(readonly route: string) {}

  add(name: UsageCounter, n = 1, project?: string, file?: string): void {
    this.#values[name] += n;
    if (project !== undefined) this.projects.add(project, name, n, file);
  }

  get(name: UsageCounter): number {
    return this.#values[name];
  }

  snapshot(): CounterValues {
    return { ...this.#values };
  }

  dump(): IndexCountersDump {
    return { values: this.snapshot(), projects: this.projects.dump() };
  }

  absorb(dump: IndexCountersDump): void {
    for (const k of USAGE_COUNTERS) this.#values[k] += dump.values[k];
    this.projects.absorb(dump.projects);
  }
}

/** One index's counters as plain data, for summing the counts of several worker processes. */
export interface IndexCountersDump {
  values: CounterValues;
  projects: ProjectCountersDump;
}

/** Every index's counters, created on first use. */
export class UsageCounters {
  readonly #byRoute = new Map<string, IndexCounters>();

  index(route: string): IndexCounters {
    let c = this.#byRoute.get(route);
    if (!c) {
      c = new IndexCounters(route);
      this.#byRoute.set(route, c);
    }
    return c;
  }

  dump(): Record<string, IndexCountersDump> {
    const out: Record<string, IndexCountersDump> = {};
    for (const [route, c] of this.#byRoute) out[route] = c.dump();
    return out;
  }

  /** The counters of several processes (their `dump`s) summed into one set. */
  static sum(dumps: ReadonlyArray<Record<string, IndexCountersDump>>): UsageCounters {
    const total = new UsageCounters();
    for (const dump of dumps) for (const [route, d] of Object.entries(dump)) total.index(route).absorb(d);
    return total;
  }

  snapshot(): Record<string, CounterValues> {
    const out: Record<string, CounterValues> = {};
    for (const [route, c] of this.#byRoute) out[route] = c.snapshot();
    return out;
  }
}

/** A sink that drops everything, for callers that do not count. */
export const NO_COUNTERS: CounterSink = { add: () => undefined };
