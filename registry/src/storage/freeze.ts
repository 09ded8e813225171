/**
 * Freezes a parsed document and everything in it. The meta stores hand the same parsed copy of a
 * document to every reader until it changes; frozen, a reader that changed it in place would throw
 * instead of changing it for the others (updateDoc changes a clone).
 */
export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
