/** Read-modify-write on a MetaStore document, retried when another writer got there first. */
import { ConflictError, type MetaStore } from './types.js';

/**
 * Attempts before giving up. With the backoff below a writer waits about 5 s in all before its
 * last attempt: enough for dozens of concurrent writers to one document on a loaded machine.
 */
const MAX_ATTEMPTS = 40;
/** The backoff after the n-th conflict: random, growing with n, capped so no writer idles long. */
const backoffMs = (attempt: number) => Math.random() * Math.min(200, 5 * 2 ** Math.min(attempt, 6));

/**
 * Applies `change` to the current document (or `undefined` when absent) and stores the result.
 * `change` may return `undefined` to leave the document as it is. It must be free of side effects:
 * it runs again after a conflict. It may be async when it must read other documents (or list keys)
 * to decide; what it read is read again on the next attempt.
 */
export async function updateDoc<T>(
  store: MetaStore,
  key: string,
  change: (current: T | undefined) => T | undefined | Promise<T | undefined>,
): Promise<{ doc: T | undefined; changed: boolean }> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = await store.get<T>(key);
    const next = await change(current ? structuredClone(current.doc) : undefined);
    if (next === undefined) return { doc: current?.doc, changed: false };
    try {
      await store.put(key, next, current ? current.version : null);
      return { doc: next, changed: true };
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      await new Promise((r) => setTimeout(r, backoffMs(attempt)));
    }
  }
  throw new ConflictError(key);
}
