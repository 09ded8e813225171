/**
 * `[connections]`: how long a client may take over each part of a request, and how many
 * connections one address may hold open. Every bound has a default, so a server that sets
 * nothing still cuts a client that stalls (docs/configuration.md, docs/operations.md).
 */
import type { FileConfig } from './schema.js';

export interface ConnectionsConfig {
  /** The request line and headers must have arrived within this long of the connection's first byte. */
  headersTimeoutMs: number;
  /** A request body that delivers no byte for this long is cut (not a total: a slow upload that moves is never cut). */
  bodyIdleTimeoutMs: number;
  /** A kept-alive connection with no request in flight is closed after this long. */
  keepAliveTimeoutMs: number;
  /** Connections one client address may hold at once, per process; 0: no cap. Trusted proxies are exempt. */
  maxPerClient: number;
  /** A stop on a signal lets kept-alive connections end after their next answer for at most this long (app/drain.ts); 0: closes them at once. */
  drainMs: number;
}

export const DEFAULT_HEADERS_TIMEOUT_SECS = 30;
export const DEFAULT_BODY_IDLE_TIMEOUT_SECS = 60;
/** Above the 60 s idle timeout of common load balancers: the balancer, not velodex, closes an idle connection first. */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_SECS = 75;
/** Long enough for a client between two requests to send its next one and be told to close. */
export const DEFAULT_DRAIN_SECS = 1;

export function resolveConnections(table: FileConfig['connections']): ConnectionsConfig {
  const t = table ?? {};
  return {
    headersTimeoutMs: (t.headers_timeout_secs ?? DEFAULT_HEADERS_TIMEOUT_SECS) * 1000,
    bodyIdleTimeoutMs: (t.body_idle_timeout_secs ?? DEFAULT_BODY_IDLE_TIMEOUT_SECS) * 1000,
    keepAliveTimeoutMs: (t.keep_alive_timeout_secs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_SECS) * 1000,
    maxPerClient: t.max_per_client ?? 0,
    drainMs: (t.drain_secs ?? DEFAULT_DRAIN_SECS) * 1000,
  };
}
