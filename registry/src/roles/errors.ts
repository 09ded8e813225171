/**
 * The failures of the neutral roles that are not an upstream exchange's (that one is
 * `UpstreamError`, upstream-error.ts). They carry a kind and no HTTP status: each ecosystem
 * answers them in its table (ecosystem/answers.ts).
 */
import { NeutralError } from '../errors/neutral.js';

/** A cached record outlived its bytes (a concurrent sweep); the next read fetches them again. */
export class CachedBytesLostError extends NeutralError {
  readonly kind = 'cached_bytes_lost';

  constructor(message = 'a cached document lost its bytes; it will be fetched again') {
    super(message);
    this.name = 'CachedBytesLostError';
  }
}

/** What was asked for does not exist, as a role or a read layer found (not a handler's route). */
export class NotFoundError extends NeutralError {
  readonly kind = 'not_found';

  constructor(message: string) {
    super(message);
    this.name = 'NotFoundError';
  }
}
