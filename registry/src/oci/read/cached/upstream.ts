/**
 * A cached index's upstream registry as its pull-through meets it: the client (`registry`),
 * whether it answered lately (`health`: `/+status`'s `upstreamOffline`, and the backoff after a
 * failure, roles/upstream-health.ts), and the one place where a failed exchange with it is
 * caught outside the tag revalidator. The caller says what is answered instead: the stored
 * list alone, or, with nothing stored, the failure restated (`orUnavailable`: 502 UNKNOWN).
 *
 * A failed exchange is an `UpstreamError` (roles/upstream-error.ts), whatever its kind. Anything
 * else is not the upstream's: an answer for the client (an `OciError`), our own cap on upstream
 * fetches (429), a store that does not answer (503), a defect (500) goes to the caller untouched.
 */
import type { IndexCounters } from '../../../observe/counters.js';
import { restated, UpstreamError } from '../../../roles/upstream-error.js';
import { UpstreamHealth } from '../../../roles/upstream-health.js';
import type { UpstreamRegistry } from './upstream-registry.js';

export class CachedUpstream {
  readonly health = new UpstreamHealth();

  constructor(
    readonly registry: UpstreamRegistry,
    /** The cached index's own counters (`upstream_errors`). */
    private readonly counters: IndexCounters,
  ) {}

  /** The upstream's URL fit for logs, messages and status documents. */
  get displayUrl(): string {
    return this.registry.displayUrl;
  }

  /** What the client is told when the upstream failed and nothing is cached (the revalidator's wording too). */
  nothingCached(why: string): string {
    return `the upstream registry ${this.displayUrl} failed and nothing is cached: ${why}`;
  }

  /**
   * Runs `exchange` with the upstream. When it fails as the upstream's failure (an
   * `UpstreamError`: no answer, a body that broke off, 5xx, 429, ...), the upstream is marked
   * down and `instead` gives the answer; anything else is thrown as it is.
   */
  async orElse<T>(exchange: () => Promise<T>, instead: (failure: UpstreamError) => T | Promise<T>): Promise<T> {
    try {
      return await exchange();
    } catch (err) {
      if (!(err instanceof UpstreamError)) throw err;
      this.health.down(err, Date.now());
      return instead(err);
    }
  }

  /** `orElse` with nothing stored to answer instead: the failure restated (502 UNKNOWN), counted once as an upstream error of `repo`. */
  orUnavailable<T>(exchange: () => Promise<T>, repo: readonly string[], message: (why: string) => string = (why) => this.nothingCached(why)): Promise<T> {
    return this.orElse(exchange, (failure) => {
      this.counters.add('upstream_errors', 1, repo.join('/'));
      throw restated(failure, message(failure.message));
    });
  }

  close(): void {
    this.registry.close();
  }
}
