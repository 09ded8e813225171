/**
 * The error model's seam: what each neutral kind (errors/neutral.ts) is as an error object, and
 * the shape of the one table in which an ecosystem answers every kind in its own words
 * (`NeutralAnswers<A>`, `A` being its answer: a status and a JSON body for the server's own
 * routes and Python, a distribution-spec code and a status for OCI). The table is a mapped type
 * over the kinds, so a kind added to the core fails the build until every table answers it.
 */
import { NeutralError, type NeutralKind, type UpstreamFailureKind } from '../errors/neutral.js';
import type { SlotsBusyError } from '../limits/slots.js';
import type { PolicyDenialError } from '../policy/denial.js';
import type { CachedBytesLostError, NotFoundError } from '../roles/errors.js';
import type { UpstreamError } from '../roles/upstream-error.js';
import type { ScratchBusyError, ScratchTooLargeError } from '../storage/scratch-budget.js';
import type { StoreUnavailableError } from '../storage/types.js';

/** The error class that carries kind `K`: what its answer may read (a `Retry-After`, a denial). */
export type NeutralErrorOf<K extends NeutralKind> = K extends UpstreamFailureKind
  ? UpstreamError
  : K extends 'slots_busy'
    ? SlotsBusyError
    : K extends 'store_unavailable'
      ? StoreUnavailableError
      : K extends 'cached_bytes_lost'
        ? CachedBytesLostError
        : K extends 'policy_denied'
          ? PolicyDenialError
          : K extends 'not_found'
            ? NotFoundError
            : K extends 'scratch_too_large'
              ? ScratchTooLargeError
              : K extends 'scratch_busy'
                ? ScratchBusyError
                : never;

/** Compiles only while every kind has its class above, and that class carries the kind. */
type MustBeNever<T extends never> = T;
export type EveryKindHasItsClass = MustBeNever<
  { [K in NeutralKind]: [NeutralErrorOf<K>] extends [never] ? K : K extends NeutralErrorOf<K>['kind'] ? never : K }[NeutralKind]
>;

/** An ecosystem's answer to every neutral kind. */
export type NeutralAnswers<A> = { readonly [K in NeutralKind]: (err: NeutralErrorOf<K>) => A };

/** The answer to `err` from `answers`, or undefined when `err` is no neutral failure. */
export function answerNeutral<A>(answers: NeutralAnswers<A>, err: unknown): A | undefined {
  if (!(err instanceof NeutralError)) return undefined;
  // The one step the compiler cannot check: a kind is carried only by its class (NeutralErrorOf).
  const answer = answers[err.kind] as (err: NeutralError) => A;
  return answer(err);
}
