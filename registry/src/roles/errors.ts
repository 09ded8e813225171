/**
 * The failures of the neutral roles that a client must be told about. They carry no HTTP status:
 * each ecosystem maps them once to its own answer (the default JSON error for index routes, the
 * distribution-spec codes under `/v2/`). `SlotsBusyError` (limits/slots.ts) is the third kind.
 */

/** The upstream could not be reached (or failed) and nothing is cached to answer with. */
export class UpstreamUnavailableError extends Error {
  constructor(why: string) {
    super(`the upstream could not be reached and nothing is cached: ${why}`);
    this.name = 'UpstreamUnavailableError';
  }
}

/** A cached document's record outlived its bytes (a concurrent sweep); the next read refetches. */
export class CachedBytesLostError extends Error {
  constructor() {
    super('a cached document lost its bytes; it will be fetched again');
    this.name = 'CachedBytesLostError';
  }
}
