/** What an ecosystem adds to the `/+status` entry of one of its indexes (Ecosystem.describe). */
export interface IndexDescription {
  /** Cached roles: true while every upstream failed its last fetch and only cached data is served. */
  upstreamOffline?: boolean;
  /** Cached roles: each upstream's health and pressure, in the order they are asked. */
  upstreams?: UpstreamReport[];
  /** What this ecosystem calls a project and a file, for people reading counts (`repository`, `manifest`). */
  terms?: { project: string; file: string };
  /** Ecosystem-specific fields, shown under the entry's `ecosystem_details`. Never a secret. */
  fields?: Record<string, unknown>;
}

/** One upstream of a cached index as `/+status` and `/metrics` show it (roles/upstream-health.ts). Never a secret. */
export interface UpstreamReport {
  /** As `displayUrl` shows it: no credentials, no path secrets. */
  url: string;
  /** `online`; `backing_off` after a failure; `rate_limited` while its Retry-After runs. */
  state: 'online' | 'backing_off' | 'rate_limited';
  online: boolean;
  /** When it is asked again (ISO time), while it is not online. */
  retry_at: string | null;
  last_error: { kind: string; message: string; at: string } | null;
  /** 429 answers it gave this process. */
  rate_limited_total: number;
  /** Its last `ratelimit-limit` / `ratelimit-remaining` figures (Docker Hub's pull limit), when it sent any. */
  rate_limit: { limit: number | null; remaining: number | null; window_secs: number | null; observed_at: string } | null;
}
