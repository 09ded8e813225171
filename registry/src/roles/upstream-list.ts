/**
 * The upstreams of a cached index, in order, and the one walk a miss (or a revalidation) makes
 * over them. Each member has its own client (credentials, egress rule, token realm: the
 * ecosystem builds it) and its own health (roles/upstream-health.ts).
 *
 * The walk (`ask`), inside whatever single-flight the caller runs it in, so a concurrent miss
 * still makes one walk:
 * 1. Members are asked in the configured order, those resting after a failure last, those whose
 *    Retry-After runs not at all.
 * 2. An answer is the answer, except a "not here" (`absent`: 404/410, or an `UpstreamError` of
 *    kind `gone`) from a member with `failoverOn404`, which asks the next one (the first such
 *    answer stands if every one says so). For what a digest pins (`pinned`), any member may
 *    answer, so a "not here" always asks the next one.
 * 3. A failure that says the upstream cannot answer now (`failsOver`: no connection, a timeout, a
 *    body that broke off, 429 or 5xx, from the upstream or its token realm) marks the member down
 *    and asks the next one. Any other
 *    `UpstreamError` (a 401, a malformed page, egress refused) marks it down and is thrown: a
 *    configuration problem is shown, not papered over by the next upstream. Anything else (our
 *    own cap, the store, a client error) is thrown untouched.
 * 4. With no member left, the last failure is thrown. A "not here" is not believed after an
 *    earlier member failed: the project may be only on that one, so the failure is thrown
 *    instead (a stored copy is then served stale, never dropped).
 *
 * Whatever member answered, what its bytes become is verified and stored the same way by the
 * caller: a digest is a digest, whichever upstream sent it.
 */
import type { UpstreamConfig } from '../config/types.js';
import { displayUrl } from '../config/sanitize.js';
import type { UpstreamReport } from '../observe/describe.js';
import { UpstreamHealth, type UpstreamState } from './upstream-health.js';
import { UpstreamError } from './upstream-error.js';

export interface UpstreamMember<C> {
  /** 0 for the first asked. */
  readonly position: number;
  /** As `displayUrl` shows it. */
  readonly url: string;
  readonly client: C;
  readonly health: UpstreamHealth;
  readonly failoverOn404: boolean;
}

export interface Asked<T, C> {
  value: T;
  member: UpstreamMember<C>;
}

export interface AskOptions<T> {
  /** Whether an answer means "not here" (404/410). */
  absent?: (value: T) => boolean;
  /**
   * What is asked for is pinned by its digest (a file a page listed with its sha256, a blob, a
   * manifest by digest), so any upstream may supply it: a "not here" always asks the next one.
   * (`failoverOn404` guards names, which two upstreams may give to different things.)
   */
  pinned?: boolean;
  /** Ask this member first while it is ready (the one whose page listed the file), then the others in order. */
  first?: UpstreamMember<unknown>;
}

/** Whether `err` says the upstream cannot answer now, so the next one is asked. */
export function failsOver(err: unknown): boolean {
  if (!(err instanceof UpstreamError)) return false;
  switch (err.kind) {
    case 'connect':
    case 'timeout':
    case 'broken':
      return true;
    // A token realm that answers 429 or 5xx cannot give the registry's answer now either.
    case 'token':
    case 'status':
      return err.status !== undefined && (err.status === 429 || err.status >= 500);
    default:
      return false;
  }
}

export class UpstreamList<C> implements UpstreamState {
  readonly members: readonly [UpstreamMember<C>, ...UpstreamMember<C>[]];
  readonly #now: () => number;

  constructor(configs: readonly [UpstreamConfig, ...UpstreamConfig[]], client: (config: UpstreamConfig, health: UpstreamHealth) => C, now: () => number = Date.now) {
    this.#now = now;
    this.members = configs.map((config, position) => {
      const health = new UpstreamHealth();
      return { position, url: displayUrl(config.url), client: client(config, health), health, failoverOn404: config.failoverOn404 };
    }) as unknown as [UpstreamMember<C>, ...UpstreamMember<C>[]];
  }

  /** True while no upstream should be asked for something stored (each rests): serve it stale. */
  resting(now: number): boolean {
    return this.members.every((m) => m.health.resting(now));
  }

  /** True while every upstream failed its last exchange. */
  get offline(): boolean {
    return this.members.every((m) => m.health.offline);
  }

  /** The newest failure of any member. */
  get lastError(): string | undefined {
    const failed = this.members.map((m) => m.health.lastFailure).filter((f) => f !== undefined);
    return failed.sort((a, b) => b.at - a.at)[0]?.message;
  }

  /** The walk already marked the member that answered. */
  up(): void {}

  /** The walk already marked each member that failed. */
  down(): void {}

  /** Each upstream's health, in order (`/+status`, `/metrics`). */
  reports(): UpstreamReport[] {
    const now = this.#now();
    return this.members.map((m) => ({ url: m.url, ...m.health.report(now) }));
  }

  async ask<T>(exchange: (member: UpstreamMember<C>) => Promise<T>, opts: AskOptions<T> = {}): Promise<Asked<T, C>> {
    const now = this.#now();
    const ready = this.members.filter((m) => !m.health.resting(now));
    const resting = this.members.filter((m) => m.health.resting(now) && !m.health.limited(now));
    const order = [...ready, ...resting];
    // The preferred member goes first only while it is ready: a resting one stays last.
    const first = opts.first === undefined ? -1 : ready.indexOf(opts.first as UpstreamMember<C>);
    if (first > 0) order.unshift(...order.splice(first, 1));
    if (order.length === 0) throw this.#allLimited(now);
    let failure: unknown;
    // The first "not here", answered or thrown: it stands when every later one says so too.
    let notHere: { asked: Asked<T, C> } | { error: UpstreamError } | undefined;
    const settle = (): Asked<T, C> => {
      if (notHere === undefined || 'error' in notHere) throw notHere?.error;
      return notHere.asked;
    };
    for (const [i, member] of order.entries()) {
      const last = i === order.length - 1;
      let value: T;
      try {
        value = await exchange(member);
      } catch (err) {
        if (!(err instanceof UpstreamError) || err.kind === 'aborted') throw err;
        if (err.kind === 'gone') {
          // A "not here" thrown rather than answered (a file's 404): the same rule as `absent`.
          member.health.up();
          if (failure !== undefined) throw failure;
          notHere ??= { error: err };
          if ((member.failoverOn404 || opts.pinned === true) && !last) continue;
          return settle();
        }
        member.health.down(err, this.#now());
        if (last || !failsOver(err)) throw err;
        failure = err;
        continue;
      }
      member.health.up();
      if (opts.absent?.(value)) {
        if (failure !== undefined) throw failure;
        notHere ??= { asked: { value, member } };
        if ((member.failoverOn404 || opts.pinned === true) && !last) continue;
        return settle();
      }
      return { value, member };
    }
    // Unreached: the last member returns or throws above.
    return settle();
  }

  #allLimited(now: number): UpstreamError {
    const until = Math.min(...this.members.map((m) => Date.parse(m.health.report(now).retry_at ?? '') || now));
    const which = this.members.length === 1 ? 'the upstream asked' : 'every upstream asked';
    return new UpstreamError('status', null, `${which} not to be asked before ${new Date(until).toISOString()} (429, Retry-After)`, { status: 429 });
  }
}
