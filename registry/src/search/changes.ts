/**
 * The search's change log: one small MetaStore document per index at `search/changes/<index>`,
 * through which every process's search index (keeper.ts) learns what the others wrote, without a
 * request ever listing the store. Kept only while search is on: with it off, no write touches it.
 *
 * - `serial` grows by one with every recorded change of the index (an upload, yank, delete,
 *   restore, promote, manifest push or delete, a tag moved; a page, file or manifest a cached
 *   index stored): compare-and-swap increments, so concurrent writers never lose one.
 * - `changed` maps each name to the serial of its last change, the newest `MAX_LOGGED` names;
 *   past that the oldest quarter is forgotten at once, and `floor` is the newest serial forgotten:
 *   a reader that last looked before it fell behind the log's window and reads the whole index
 *   again. The document stays small (a few hundred KiB at most) however many projects an index
 *   holds, so a refresh with nothing new costs one stat (fs) or one conditional GET answered 304
 *   (s3), and an append rewrites only it.
 *
 * It used to be the `changed` map of the index's `/+status` summary (observe/summary.ts), whose
 * `projects` map counts every project: at 100k projects a refresh read and parsed megabytes every
 * `refresh_secs`, and every cached fill rewrote that document.
 *
 * A change is told to this process's listeners (its own search index) at once, then appended;
 * the writer does not wait for the append (its write has committed; the append is for the other
 * processes). Appends of one index in one process go together (`updateDoc`'s group commit), so a
 * burst of writes costs a few writes of this document, not one each. An append that fails is
 * logged (`search change not logged`): the name stays stale on the other processes until its next
 * change or their restart.
 */
import type { MetaStore } from '../storage/types.js';
import { updateDoc } from '../storage/update.js';

/** Names kept; past it the oldest quarter is forgotten at once (so trimming is rare). */
export const MAX_LOGGED = 4096;

export interface ChangeLogDoc {
  serial: number;
  /** Name -> the serial of its last change. */
  changed: Record<string, number>;
  /** The newest serial `changed` no longer holds a name of (absent: it forgot none). */
  floor?: number;
}

/** Told of every change recorded in this process, with the names it touched (before the append). */
export type ChangeListener = (indexName: string, names: readonly string[]) => void;

/**
 * Told once this process's append of a change is stored: for each name, the serial the append gave
 * it and the serial of the name's change before it (undefined: none logged). A reader that read the
 * name again after the change (the `ChangeListener`'s part) need not read it at that serial again,
 * unless the change before it is one it has not read (another process's, just before).
 */
export type AppendListener = (indexName: string, appended: ReadonlyMap<string, { serial: number; before: number | undefined }>) => void;

type Log = { warn(obj: object, msg: string): void };

function append(doc: ChangeLogDoc, names: readonly string[]): void {
  doc.serial += 1;
  // Defined, not assigned: a name is a client's word, and `__proto__` must stay a key.
  for (const name of names) Object.defineProperty(doc.changed, name, { value: doc.serial, enumerable: true, writable: true, configurable: true });
  const entries = Object.entries(doc.changed);
  if (entries.length <= MAX_LOGGED) return;
  entries.sort((a, b) => a[1] - b[1]);
  const dropped = entries.slice(0, entries.length - Math.floor((MAX_LOGGED * 3) / 4));
  for (const [name] of dropped) delete doc.changed[name];
  doc.floor = Math.max(doc.floor ?? 0, dropped.at(-1)![1]);
}

function serialOf(doc: ChangeLogDoc, name: string): number | undefined {
  return Object.hasOwn(doc.changed, name) ? doc.changed[name] : undefined;
}

export class SearchChanges {
  readonly #listeners: ChangeListener[] = [];
  readonly #appendListeners: AppendListener[] = [];

  constructor(
    private readonly meta: MetaStore,
    private readonly log: Log,
  ) {}

  static key(indexName: string): string {
    return `search/changes/${indexName}`;
  }

  /** `listener` hears of every change recorded through this object (this process's writes). */
  listen(listener: ChangeListener): void {
    this.#listeners.push(listener);
  }

  /** `listener` hears of every append through this object, once stored (`AppendListener`). */
  onAppended(listener: AppendListener): void {
    this.#appendListeners.push(listener);
  }

  async read(indexName: string): Promise<ChangeLogDoc | null> {
    return (await this.meta.get<ChangeLogDoc>(SearchChanges.key(indexName)))?.doc ?? null;
  }

  /**
   * Records a committed change of `names`: this process's listeners at once, then the log.
   * Resolves once appended; never rejects (a failure is logged). Writers need not wait for it.
   */
  async record(indexName: string, names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    for (const listener of this.#listeners) listener(indexName, names);
    let appended = new Map<string, { serial: number; before: number | undefined }>();
    try {
      await updateDoc<ChangeLogDoc>(this.meta, SearchChanges.key(indexName), (current) => {
        const doc = current ?? { serial: 0, changed: {} };
        // Per attempt: a conflict runs this again on the stored document.
        const before = new Map(names.map((name) => [name, serialOf(doc, name)]));
        append(doc, names);
        appended = new Map(names.map((name) => [name, { serial: doc.serial, before: before.get(name) }]));
        return doc;
      });
      for (const listener of this.#appendListeners) listener(indexName, appended);
    } catch (err) {
      this.log.warn({ index: indexName, names: names.slice(0, 10), err: err instanceof Error ? err.message : String(err) }, 'search change not logged');
    }
  }
}
