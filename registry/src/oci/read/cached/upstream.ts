/**
 * A cached index's upstream registry as its pull-through meets it: the client (`registry`),
 * whether it answered lately (`health`: `/+status`'s `upstreamOffline`, and the backoff after a
 * failure, roles/upstream-health.ts), and the one place where a failed exchange with it is
 * caught. The caller says what is answered instead: the stored mapping, the stored list alone,
 * or, with nothing stored, 502 UNKNOWN (`orUnavailable`).
 */
import type { IndexCounters } from '../../../observe/counters.js';
import { UpstreamHealth } from '../../../roles/upstream-health.js';
import { OciError } from '../../model/errors.js';
import { upstreamFailureOf, type UpstreamFailure } from './upstream-failure.js';
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

  /**
   * Runs `exchange` with the upstream. When it fails as the upstream's failure
   * (`upstreamFailureOf`: no answer, a body that broke off, 5xx, 429, ...), the upstream is
   * marked down and `instead` gives the answer; anything else (an answer for the client, a busy
   * upstream cap) is thrown as it is.
   */
  async orElse<T>(exchange: () => Promise<T>, instead: (failure: UpstreamFailure) => T | Promise<T>): Promise<T> {
    try {
      return await exchange();
    } catch (err) {
      const failure = upstreamFailureOf(err);
      if (!failure) throw err;
      this.health.down(failure, Date.now());
      return instead(failure);
    }
  }

  /** `orElse` with nothing stored to answer instead: 502 UNKNOWN, counted once as an upstream error of `repo`. */
  orUnavailable<T>(exchange: () => Promise<T>, repo: readonly string[]): Promise<T> {
    return this.orElse(exchange, (failure) => {
      this.counters.add('upstream_errors', 1, repo.join('/'));
      throw new OciError('UNKNOWN', `the upstream registry ${this.displayUrl} failed and nothing is cached: ${failure.message}`);
    });
  }

  close(): void {
    this.registry.close();
  }
}
