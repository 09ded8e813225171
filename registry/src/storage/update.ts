/** Read-modify-write on a MetaStore document, retried when another writer got there first. */
import { ConflictError, type MetaStore } from './types.js';

/**
 * Attempts before giving up. With the backoff below a writer waits about 5 s in all before its
 * last attempt: enough for dozens of concurrent writers to one document on a loaded machine.
 */
const MAX_ATTEMPTS = 40;
/** The backoff after the n-th conflict: random, growing with n, capped so no writer idles long. */
const backoffMs = (attempt: number) => Math.random() * Math.min(200, 5 * 2 ** Math.min(attempt, 6));

type Change<T> = (current: T | undefined) => T | undefined | Promise<T | undefined>;
type Updated<T> = { doc: T | undefined; changed: boolean };

interface Waiting<T> {
  change: Change<T>;
  resolve: (result: Updated<T>) => void;
  reject: (err: unknown) => void;
}

/** The updates of one document waiting in this process while one write of it is under way. */
interface Queue {
  waiting: Waiting<unknown>[];
}

/** Per store, the documents this process is updating now. */
const queues = new WeakMap<MetaStore, Map<string, Queue>>();

/**
 * Applies `change` to the current document (or `undefined` when absent) and stores the result.
 * `change` may return `undefined` to leave the document as it is. It must be free of side effects:
 * it runs again after a conflict. It may be async when it must read other documents (or list keys)
 * to decide; what it read is read again on the next attempt. It must not update `key` itself.
 *
 * Updates of one document in one process are written together: while one write is under way,
 * the updates that arrive wait, and the next write applies all of them in turn and stores the
 * result once (a group commit). Each resolves only once a write that holds its change is stored,
 * so an acknowledged update is as durable as before. Run each on its own, they could only
 * collide: all read one version, one write wins, the rest back off for random milliseconds and
 * read again; six pull-throughs adding their repositories to one catalog took up to 200 ms that
 * way, and one after another each waits for the others' syncs. Writers in other processes still
 * collide, and the compare-and-swap with its retries is what keeps them exact.
 */
export function updateDoc<T>(store: MetaStore, key: string, change: Change<T>): Promise<Updated<T>> {
  let docs = queues.get(store);
  if (!docs) {
    docs = new Map();
    queues.set(store, docs);
  }
  return new Promise<Updated<T>>((resolve, reject) => {
    const waiting = { change, resolve, reject } as Waiting<unknown>;
    const queue = docs.get(key);
    if (queue) {
      queue.waiting.push(waiting);
      return;
    }
    const started: Queue = { waiting: [waiting] };
    docs.set(key, started);
    void drain(store, key, started, docs);
  });
}

/** Writes the waiting updates of `key`, all that waited at once in one write, until none wait. */
async function drain(store: MetaStore, key: string, queue: Queue, docs: Map<string, Queue>): Promise<void> {
  while (queue.waiting.length > 0) {
    const batch = queue.waiting;
    queue.waiting = [];
    try {
      const results = await writeTogether(store, key, batch.map((w) => w.change));
      batch.forEach((w, i) => {
        const result = results[i]!;
        if ('error' in result) w.reject(result.error);
        else w.resolve(result);
      });
    } catch (err) {
      for (const w of batch) w.reject(err);
    }
  }
  docs.delete(key);
}

/**
 * Applies `changes` in turn to the current document and stores the result in one write, retried
 * on a conflict: each change's result (the document as it left it), or the error it threw.
 */
async function writeTogether(store: MetaStore, key: string, changes: Change<unknown>[]): Promise<Array<Updated<unknown> | { error: unknown }>> {
  // The first attempt starts from what this process last saw of the document (`MetaStore.seen`),
  // when the store keeps it, rather than from a read: the compare-and-swap checks that guess. A
  // wrong guess costs the failed write and the read it saved; a guess that asks for no write is
  // not trusted, and the document is read to decide.
  let guess = store.seen?.(key);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const guessed = guess !== undefined;
    const current = guessed ? guess : await store.get<unknown>(key);
    guess = undefined;
    let doc: unknown = current?.doc;
    let written = false;
    const results: Array<Updated<unknown> | { error: unknown }> = [];
    for (const change of changes) {
      try {
        // Each change gets its own copy: a change that returns undefined leaves no trace.
        const next = await change(doc === undefined ? undefined : structuredClone(doc));
        if (next === undefined) {
          results.push({ doc, changed: false });
        } else {
          doc = next;
          written = true;
          results.push({ doc: next, changed: true });
        }
      } catch (error) {
        results.push({ error });
      }
    }
    if (!written) {
      if (guessed) continue;
      return results;
    }
    try {
      await store.put(key, doc, current ? current.version : null);
      return results;
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      // A stale guess is no other writer's race: read at once.
      if (!guessed) await new Promise((r) => setTimeout(r, backoffMs(attempt)));
    }
  }
  throw new ConflictError(key);
}
