/**
 * The counters of the whole server, whichever worker process is asked: each worker counts its own
 * requests in its memory (no I/O, no message per request), and a reader of `/+stats` or
 * `/+status` gathers every worker's counts through the primary (`workers/link.ts`) and sums them.
 * A server of one process reads its own counters directly.
 */
import type { RateLimitCounters, RateLimitSnapshot } from '../../limits/rate-limiter.js';
import { UsageCounters, type IndexCountersDump } from '../../observe/counters.js';
import type { WorkerPeers } from '../../observe/peers.js';
import type { RequestCounters, RequestSnapshot } from '../../observe/requests.js';

const TOPIC = 'counters';

interface WorkerCounts {
  usage: Record<string, IndexCountersDump>;
  requests: RequestSnapshot;
  rateLimit: RateLimitSnapshot;
}

export interface LocalCounters {
  usage: UsageCounters;
  requests: RequestCounters;
  rateLimits: RateLimitCounters;
}

export interface ServerTotals {
  usage: UsageCounters;
  requests: RequestSnapshot;
  rateLimit: RateLimitSnapshot;
}

export class ServerCounters {
  constructor(
    private readonly peers: WorkerPeers,
    private readonly local: LocalCounters,
  ) {
    peers.provide(TOPIC, (): WorkerCounts => ({ usage: local.usage.dump(), requests: local.requests.snapshot(), rateLimit: local.rateLimits.snapshot() }));
  }

  async totals(): Promise<ServerTotals> {
    const { usage, requests, rateLimits } = this.local;
    if (this.peers.workers === 1) return { usage, requests: requests.snapshot(), rateLimit: rateLimits.snapshot() };
    const parts = await this.peers.gather<WorkerCounts>(TOPIC);
    return {
      usage: UsageCounters.sum(parts.map((p) => p.usage)),
      requests: sumRequests(parts.map((p) => p.requests)),
      rateLimit: { allowed: sumRecords(parts.map((p) => p.rateLimit.allowed)), denied: sumRecords(parts.map((p) => p.rateLimit.denied)) },
    };
  }
}

function sumRequests(parts: RequestSnapshot[]): RequestSnapshot {
  return { total: parts.reduce((n, p) => n + p.total, 0), by_status: sumRecords(parts.map((p) => p.by_status)) };
}

function sumRecords<K extends string>(parts: Array<Record<K, number>>): Record<K, number> {
  const out = {} as Record<K, number>;
  for (const p of parts) for (const [k, v] of Object.entries(p) as Array<[K, number]>) out[k] = (out[k] ?? 0) + v;
  return out;
}
