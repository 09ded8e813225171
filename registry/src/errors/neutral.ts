/**
 * The failures the neutral core raises, by kind. The core (roles/, limits/, storage/, policy/)
 * and an ecosystem's read layer throw them without an HTTP status; each ecosystem answers every
 * kind in one table of its own (`NeutralAnswers`, ecosystem/answers.ts), so a kind added here
 * fails the build until every table answers it.
 *
 * This folder is the bottom of registry/src: storage imports it too, so it imports nothing.
 */

/**
 * How an exchange with an upstream failed (roles/upstream-error.ts `UpstreamError`). Every one
 * of them is also a neutral kind: a client is told about each in its ecosystem's words.
 */
export const UPSTREAM_FAILURE_KINDS = [
  /** No connection: refused, reset, name resolution, TLS. */
  'connect',
  /** No response headers in time, or a body that went idle. */
  'timeout',
  /** Too many redirects, or one to a scheme other than http(s). */
  'redirect',
  /** The caller gave up (its signal fired). */
  'aborted',
  /** The host is not one this index may reach (`upstream_hosts`, roles/egress.ts). */
  'refused',
  /** An answer that is neither the content nor "gone" (5xx, 429, an unexpected 401/403, a 304 to an unconditional request); `status` says which. */
  'status',
  /** The upstream does not have what was asked for (404/410) where only the content would do. */
  'gone',
  /** Larger than its reader keeps. */
  'too_large',
  /** The token realm refused, or answered no token. */
  'token',
  /** A range answer that cannot be used (roles/upstream-range.ts): the caller reads the file whole. */
  'range',
  /** An answer that is not what it claims to be (a page, a listing, metadata that does not parse). */
  'malformed',
  /** Bytes that do not match the digest the upstream announced for them. */
  'mismatch',
  /** A transfer that broke off, or ended without its bytes stored. */
  'broken',
] as const;

export type UpstreamFailureKind = (typeof UPSTREAM_FAILURE_KINDS)[number];

/** The core's failures that are not an upstream exchange's. */
export const CORE_FAILURE_KINDS = [
  /** No slot of a capped resource freed in time (limits/slots.ts): retry later. */
  'slots_busy',
  /** The storage backend did not answer (storage/types.ts). */
  'store_unavailable',
  /** A cached record outlived its bytes (a concurrent sweep): the next read fetches them again. */
  'cached_bytes_lost',
  /** A policy rule refused (policy/denial.ts); the error carries the spec's denial object. */
  'policy_denied',
  /** What was asked for does not exist, decided below the handlers (roles/errors.ts `NotFoundError`). */
  'not_found',
  /** A write needs more scratch space than the whole limit (storage/scratch-budget.ts): no retry helps. */
  'scratch_too_large',
  /** A write fits the scratch limit but not what other writes leave free now: retry later. */
  'scratch_busy',
] as const;

export type CoreFailureKind = (typeof CORE_FAILURE_KINDS)[number];

export type NeutralKind = UpstreamFailureKind | CoreFailureKind;

export const NEUTRAL_KINDS: readonly NeutralKind[] = [...UPSTREAM_FAILURE_KINDS, ...CORE_FAILURE_KINDS];

/**
 * A failure of the neutral core: it says what went wrong (`kind`, a message fit for the person
 * behind the client), never how to answer it. Subclasses fix the kind and carry what an answer
 * needs (a `Retry-After`, a denial object). Told apart by `kind`, never by `name`.
 */
export abstract class NeutralError extends Error {
  abstract readonly kind: NeutralKind;
}
