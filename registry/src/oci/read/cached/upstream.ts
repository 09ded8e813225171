/**
 * A cached index's upstream registries as its pull-through meets them: one `UpstreamRegistry`
 * per configured upstream (its own credentials, token realm, egress rule and health), asked in
 * order (`ask`, roles/upstream-list.ts: failover on no answer, 429 and 5xx, on 404 where the
 * upstream says `failover_on_404`, and always for what a digest pins), and the one place where a
 * failed exchange is caught outside the tag revalidator. The caller says what is answered
 * instead: the stored list alone, or, with nothing stored, the failure restated (`orUnavailable`:
 * 502 UNKNOWN).
 *
 * A failed exchange is an `UpstreamError` (roles/upstream-error.ts), whatever its kind. Anything
 * else is not the upstream's: an answer for the client (an `OciError`), our own cap on upstream
 * fetches (429), a store that does not answer (503), a defect (500) goes to the caller untouched.
 */
import type { CachedIndex } from '../../../config/types.js';
import type { UpstreamSlots } from '../../../limits/upstream-slots.js';
import type { IndexCounters } from '../../../observe/counters.js';
import { restated, UpstreamError } from '../../../roles/upstream-error.js';
import { UpstreamList, type AskOptions, type UpstreamMember } from '../../../roles/upstream-list.js';
import { UpstreamRegistry } from './upstream-registry.js';

/** Repositories whose last answering upstream is remembered (the oldest is forgotten first). */
const REMEMBERED_REPOS = 4096;

export class CachedUpstream {
  /** The upstreams in order, with their health (`/+status`, the revalidator's resting check). */
  readonly list: UpstreamList<UpstreamRegistry>;
  /**
   * Which upstream answered last for a repository: what a digest pins (its blobs, manifests by
   * digest) is asked of that one first, so a repository found on the second upstream does not
   * send every blob to the first for a 404.
   */
  readonly #servedBy = new Map<string, UpstreamMember<UpstreamRegistry>>();

  constructor(
    index: CachedIndex,
    slots: UpstreamSlots,
    /** The cached index's own counters (`upstream_errors`). */
    private readonly counters: IndexCounters,
  ) {
    this.list = new UpstreamList(index.upstreams, (upstream, health) => new UpstreamRegistry(upstream, slots, (status, headers) => health.observe(status, headers, Date.now())));
  }

  /** The upstreams' URLs fit for logs, messages and status documents. */
  get displayUrl(): string {
    return this.list.members.map((m) => m.url).join(', ');
  }

  /** What the client is told when the upstreams failed and nothing is cached (the revalidator's wording too). */
  nothingCached(why: string): string {
    const which = this.list.members.length === 1 ? `the upstream registry ${this.displayUrl}` : `the upstream registries (${this.displayUrl})`;
    return `${which} failed and nothing is cached: ${why}`;
  }

  /**
   * `exchange` with each upstream in order until one answers (roles/upstream-list.ts); for what a
   * digest pins, the one that last answered for `repo` first.
   */
  async ask<T>(repo: readonly string[], exchange: (registry: UpstreamRegistry) => Promise<T>, opts: AskOptions<T> = {}): Promise<T> {
    const name = repo.join('/');
    const last = this.#servedBy.get(name);
    const asked = await this.list.ask((m) => exchange(m.client), { ...opts, ...(opts.pinned && last ? { first: last } : {}) });
    if (!(opts.absent?.(asked.value) ?? false)) {
      this.#servedBy.delete(name);
      this.#servedBy.set(name, asked.member);
      if (this.#servedBy.size > REMEMBERED_REPOS) this.#servedBy.delete(this.#servedBy.keys().next().value!);
    }
    return asked.value;
  }

  /**
   * Runs `exchange` with the upstreams. When it fails as the upstreams' failure (an
   * `UpstreamError`: no answer, a body that broke off, 5xx, 429, ...; each upstream asked was
   * marked down by the walk), `instead` gives the answer; anything else is thrown as it is.
   */
  async orElse<T>(exchange: () => Promise<T>, instead: (failure: UpstreamError) => T | Promise<T>): Promise<T> {
    try {
      return await exchange();
    } catch (err) {
      if (!(err instanceof UpstreamError)) throw err;
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
    for (const m of this.list.members) m.client.close();
  }
}
