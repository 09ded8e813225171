/**
 * The usage counters of `/+stats`, per index route, kept in process memory. Increments are plain
 * additions on a preallocated record (no allocation, no I/O on the request path); readers take a
 * snapshot. Counters reset on restart, as the spec says.
 */
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
] as const;

export type UsageCounter = (typeof USAGE_COUNTERS)[number];
export type CounterValues = Record<UsageCounter, number>;

/** What the neutral machinery needs: somewhere to count. */
export interface CounterSink {
  add(name: UsageCounter, n?: number): void;
}

function zeroes(): CounterValues {
  return Object.fromEntries(USAGE_COUNTERS.map((n) => [n, 0])) as CounterValues;
}

export class IndexCounters implements CounterSink {
  readonly #values: CounterValues = zeroes();

  constructor(readonly route: string) {}

  add(name: UsageCounter, n = 1): void {
    this.#values[name] += n;
  }

  get(name: UsageCounter): number {
    return this.#values[name];
  }

  snapshot(): CounterValues {
    return { ...this.#values };
  }
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

  snapshot(): Record<string, CounterValues> {
    const out: Record<string, CounterValues> = {};
    for (const [route, c] of this.#byRoute) out[route] = c.snapshot();
    return out;
  }
}

/** A sink that drops everything, for callers that do not count. */
export const NO_COUNTERS: CounterSink = { add: () => undefined };
