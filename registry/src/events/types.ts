/**
 * What an ecosystem tells the event bus after a write has committed (or a cached index kept a
 * copy its upstream deleted: kept.ts), and the delivery document the durable outbox keeps until
 * the receiver accepts it.
 */

export const EVENT_NAMES = ['upload', 'yank', 'unyank', 'delete', 'restore', 'kept_after_upstream_delete'] as const;
export type EventName = (typeof EVENT_NAMES)[number];

export interface WriteEvent {
  event: EventName;
  /** Name of the index the request came through. */
  index: string;
  /** Route of that index. */
  route: string;
  /** The index whose data changed (a virtual route's upload target, or the route's own index). */
  localIndex: string;
  project: string;
  version?: string;
  /** How many files changed; at least 1 (callers emit nothing for zero). */
  count: number;
  file?: { filename: string; sha256: string };
  /** The Basic-auth username of the writer (never the password). */
  actor?: string;
  requestId?: string;
}

/** Where ecosystems send their events; the outbox makes them durable before this resolves. */
export interface EventSink {
  emit(event: WriteEvent): Promise<void>;
}

/**
 * One pending delivery, stored under `events/outbox/<id>`. The secret is never stored: the target
 * is looked up again in the running config (owner index + position, checked by a hash of the URL).
 */
export interface StoredDelivery {
  id: string;
  event: EventName;
  /** Name of the index whose `[[index.webhook]]` list holds the target. */
  owner: string;
  /** Position of the target in that list. */
  target: number;
  /** sha256 of the target URL, so a changed config does not send to the wrong place. */
  urlHash: string;
  /** The exact JSON body, fixed at enqueue time: every retry sends (and signs) these bytes. */
  body: string;
  /** Epoch milliseconds. */
  createdAt: number;
  attempts: number;
  nextAttemptAt: number;
  /** Last failure, short and free of secrets (a status code or an error code). */
  lastError?: string;
  /** Set while one process sends it (outbox.ts `claim`); the others leave it alone until `until`. */
  lease?: DeliveryLease;
}

export interface DeliveryLease {
  /** The claiming process (`<host>:<pid>:<random>`): opaque, for logs and tests. */
  owner: string;
  /** Epoch milliseconds, by the claimer's clock. */
  until: number;
}
