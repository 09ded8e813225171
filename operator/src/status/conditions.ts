/**
 * Conditions in the KEP-1623 shape (`metav1.Condition`), with the two kstatus conditions beside
 * `Ready` and `Degraded`, so Flux, Argo CD and `kubectl wait --for=condition=Ready` agree:
 *
 *   Ready        True when the index serves on every ready pod of its registry.
 *   Degraded     True while it serves but is impaired (its upstream offline: cached data only).
 *   Reconciling  True while the operator waits for something that comes by itself (pods rolling).
 *   Stalled      True when it cannot serve until a person changes something (a missing Secret,
 *                a conflicting route, an invalid spec): kstatus reads this as Failed.
 *
 * `lastTransitionTime` changes only when a condition's status does, so rewriting the same status
 * is a no-op the API server does not even store.
 */
import type { Condition } from '../resources/types.js';

export type ConditionInput = Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>;

/** Merges `wanted` onto `previous`: the transition time is kept where the status did not change. */
export function nextConditions(previous: readonly Condition[] | undefined, wanted: readonly ConditionInput[], generation: number | undefined, now: Date): Condition[] {
  return wanted.map((c) => {
    const old = previous?.find((p) => p.type === c.type);
    const lastTransitionTime = old && old.status === c.status ? old.lastTransitionTime : now.toISOString().replace(/\.\d{3}Z$/, 'Z');
    return { type: c.type, status: c.status, ...(generation !== undefined ? { observedGeneration: generation } : {}), lastTransitionTime, reason: c.reason, message: c.message };
  });
}

export function conditionOf(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}
