/** What an ecosystem adds to the `/+status` entry of one of its indexes (Ecosystem.describe). */
export interface IndexDescription {
  /** Cached roles: true while the upstream failed its last fetch and only cached data is served. */
  upstreamOffline?: boolean;
  /** What this ecosystem calls a project and a file, for people reading counts (`repository`, `manifest`). */
  terms?: { project: string; file: string };
  /** Ecosystem-specific fields, shown under the entry's `ecosystem_details`. Never a secret. */
  fields?: Record<string, unknown>;
}
