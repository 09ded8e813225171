/** Read-modify-write on a MetaStore document, retried when another writer got there first. */
import { ConflictError, type MetaStore } from './types.js';

const MAX_ATTEMPTS = 20;

/**
 * Applies `change` to the current document (or `undefined` when absent) and stores the result.
 * `change` may return `undefined` to leave the document as it is. It must be free of side effects:
 * it runs again after a conflict.
 */
export async function updateDoc<T>(
  store: MetaStore,
  key: string,
  change: (current: T | undefined) => T | undefined,
): Promise<{ doc: T | undefined; changed: boolean }> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = await store.get<T>(key);
    const next = change(current ? structuredClone(current.doc) : undefined);
    if (next === undefined) return { doc: current?.doc, changed: false };
    try {
      await store.put(key, next, current ? current.version : null);
      return { doc: next, changed: true };
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      await new Promise((r) => setTimeout(r, Math.random() * 5 * (attempt + 1)));
    }
  }
  throw new ConflictError(key);
}
