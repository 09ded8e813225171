/**
 * The per-index summary documents behind `/+status`: one small MetaStore document per index at
 * `observe/summary/<index name>`, kept current by the writes themselves, so a status request reads
 * documents instead of scanning the store, and every replica on a shared store reads the same.
 *
 * - `serial` grows by one with every write an index commits (upload, yank, delete, restore,
 *   promote, manifest push or delete). The server's `serial` is the sum over its indexes: each
 *   term only grows (compare-and-swap increments, so concurrent writers on several processes
 *   never lose one), so the sum only grows too, whichever replica answers.
 * - `projects` maps each project (or repository) to its number of files (or manifests) as the
 *   writer saw it right after its write: an absolute value, so a lost or repeated update heals
 *   with the next write of that project; 0 drops the project.
 *   Past `SHARD_AT` projects the map moves out into shard documents of its own
 *   (`observe/summary-projects/<index>/<generation>/<n>`, a project in the one its name hashes to),
 *   about `PER_SHARD` projects each, and the summary names their generation and count: at 100k
 *   projects one map was megabytes rewritten by every upload (about 0.5 s each on fs). A write then
 *   updates the summary (serial, recent) and the one shard of its project. A shard grown past
 *   `GROW_AT` projects moves them all into twice as many (or more). Shards are written under a new
 *   generation before a compare-and-swap of the summary points to it (a move, a repair), so a
 *   mover that loses the race never mixes its shards with the winner's; it deletes its own. A move
 *   runs after the write that found it due, off that write's answer. A count written to the old
 *   shards while a move copies them can stay behind until that project's next write or a scan,
 *   as with any summary write a process did not finish. Only the admin details read the shards,
 *   never a plain `/+status`.
 * - `recent` is the newest uploads first, capped at `MAX_RECENT`.
 *
 * The names a write touched are told to this process's listeners (the search's change log,
 * search/changes.ts, when search is on): the search keeps its own small document, since this one
 * holds a count per project (megabytes at 100k projects) and is no reading for every refresh.
 *
 * Cost and contention: a committed write adds one read and one conditional write of its index's
 * document before its response, and all writers of an index share that document, so on a shared
 * store every conflict costs another read and write. Within a process, the writes that arrive
 * while the document is being written wait and go together in the next write (`updateDoc`'s
 * group commit, storage/update.ts), so at most one writer per process races for it, however many
 * requests are in flight: 48 concurrent uploads through 3 processes on MinIO cost 8 read-write
 * pairs, against about 200 with one compare-and-swap per upload. `updateDoc` gives up after
 * about 5 s of conflicts; the client's write does not fail then (`recordAfterCommit` logs it),
 * only the serial misses those counts.
 *
 * - `kept` maps each page or tag a cached index serves on after its upstream deleted it
 *   (`upstream_deletions = "keep"`) to when that was first seen (ms since the epoch): set and
 *   cleared by `markKept`, told by the one refresh that set or cleared the copy's own mark, so
 *   it moves no serial (the content did not change). Its size is the number of such copies, one
 *   short entry each (an upstream's deletes, not its contents).
 *
 * The writer updates the summary after its own write has committed. A process that dies in
 * between leaves the summary one write behind: the ecosystem's scan (`Ecosystem.scanIndex`)
 * rebuilds `projects` and `recent` (never `serial`, which cannot be recounted and stays as is).
 */
import { createHash, randomBytes } from 'node:crypto';
import { ConflictError, type MetaStore } from '../storage/types.js';
import { updateDoc } from '../storage/update.js';

export const MAX_RECENT = 50;
/** Projects a summary keeps in its own `projects` map; past this they move into shards. */
export const SHARD_AT = 2_000;
/** Projects per shard a move aims at (a shard is then some 20 KB), and the size that makes it move again. */
export const PER_SHARD = 500;
const GROW_AT = 4 * PER_SHARD;
const MAX_SHARDS = 4096;
/** Shard reads at once (the admin details read them all). */
const SHARD_READS_AT_ONCE = 16;
/** Tries of a move into shards that lost its compare-and-swap to another write of the summary. */
const MOVE_ATTEMPTS = 5;

export interface RecentUpload {
  /** ISO 8601 UTC. */
  time: string;
  /** The name of the index that stores it. */
  index: string;
  project: string;
  version?: string;
  filename: string;
  /** Which credential uploaded it (`upload_token`, `token:<name>`), where the ecosystem keeps it. */
  by?: string;
}

export interface IndexSummaryDoc {
  serial: number;
  projects: Record<string, number>;
  recent: RecentUpload[];
  /** When a scan last rebuilt `projects` and `recent`. */
  scannedAt?: string;
  /** A cached index's copies kept after the upstream deleted them: name (a project, `repo:tag`) -> since (ms). */
  kept?: Record<string, number>;
  /** Set once `projects` has moved into shards (then empty here): their generation and how many. */
  projectShards?: ProjectShards;
}

export interface ProjectShards {
  generation: string;
  count: number;
}

/** One shard of a sharded summary's `projects`. */
interface ProjectShardDoc {
  projects: Record<string, number>;
}

/** What one write changed: absolute file counts of the projects it touched, and its uploads. */
export interface SummaryChange {
  projects?: Record<string, number>;
  uploads?: RecentUpload[];
  /** Projects the write changed beyond those in `projects` (a yank, an override): for the listeners. */
  changed?: string[];
}

/** Told of every change this process records, with the names it touched (after the document is written, or failed to be). */
export type SummaryListener = (indexName: string, names: readonly string[]) => Promise<void> | void;

/** The names a change touched. */
export function changedNames(change: SummaryChange): string[] {
  return [...new Set([...Object.keys(change.projects ?? {}), ...(change.changed ?? [])])];
}

/** What a scan of an index's metadata found. */
export interface ScannedSummary {
  projects: Record<string, number>;
  recent: RecentUpload[];
}

const empty = (): IndexSummaryDoc => ({ serial: 0, projects: {}, recent: [] });

function newestFirst(a: RecentUpload, b: RecentUpload): number {
  return a.time < b.time ? 1 : a.time > b.time ? -1 : 0;
}

export function capRecent(uploads: RecentUpload[]): RecentUpload[] {
  return [...uploads].sort(newestFirst).slice(0, MAX_RECENT);
}

/**
 * One write's change, applied to the document (serial, recent uploads, and the absolute project
 * counts unless they live in shards).
 */
function apply(doc: IndexSummaryDoc, change: SummaryChange): void {
  doc.serial += 1;
  // The change serials the search kept here before it had its own log (search/changes.ts): dropped on the next write.
  const legacy = doc as IndexSummaryDoc & { changed?: unknown; changedFloor?: unknown };
  delete legacy.changed;
  delete legacy.changedFloor;
  if (doc.projectShards === undefined) setCounts(doc.projects, change.projects ?? {});
  if (change.uploads?.length) doc.recent = capRecent([...change.uploads, ...doc.recent]);
}

/** Absolute counts into `projects`: 0 drops the project. Defined, never assigned (a project may be named `__proto__`). */
function setCounts(projects: Record<string, number>, counts: Record<string, number>): void {
  for (const [project, files] of Object.entries(counts)) {
    if (files > 0) Object.defineProperty(projects, project, { value: files, enumerable: true, writable: true, configurable: true });
    else delete projects[project];
  }
}

function shardOf(project: string, shards: number): number {
  return createHash('sha1').update(project).digest().readUInt32BE(0) % shards;
}

/** Shards for `projects` projects: about `PER_SHARD` each, a power of two. */
function shardsFor(projects: number): number {
  let n = 16;
  while (n < MAX_SHARDS && n * PER_SHARD < projects) n *= 2;
  return n;
}

/** `counts` split over `shards` (only the shards that get any), zeros kept: they drop a project from its shard. */
function byShard(counts: Record<string, number>, shards: number): Map<number, Record<string, number>> {
  const out = new Map<number, Record<string, number>>();
  for (const [project, files] of Object.entries(counts)) {
    const n = shardOf(project, shards);
    let shard = out.get(n);
    if (!shard) out.set(n, (shard = {}));
    Object.defineProperty(shard, project, { value: files, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

export class IndexSummaries {
  readonly #listeners: SummaryListener[] = [];
  /** The move into shards under way in this process, per index: the writes past the threshold share it. */
  readonly #moves = new Map<string, Promise<unknown>>();

  constructor(private readonly meta: MetaStore) {}

  /** `listener` hears of every change recorded through this object (this process's writes). */
  listen(listener: SummaryListener): void {
    this.#listeners.push(listener);
  }

  static key(indexName: string): string {
    return `observe/summary/${indexName}`;
  }

  static shardKey(indexName: string, generation: string, n: number): string {
    return `observe/summary-projects/${indexName}/${generation}/${n}`;
  }

  /** The summary document (for a sharded one, without its projects: `projects` reads them). */
  async read(indexName: string): Promise<IndexSummaryDoc | null> {
    return (await this.meta.get<IndexSummaryDoc>(IndexSummaries.key(indexName)))?.doc ?? null;
  }

  /** Every project's count of `doc`, the summary of `indexName`: its own map, or its shards read. */
  async projects(indexName: string, doc: IndexSummaryDoc | null): Promise<Record<string, number>> {
    const sharded = doc?.projectShards;
    if (sharded === undefined) return doc?.projects ?? {};
    const all: Record<string, number> = {};
    for (let n = 0; n < sharded.count; n += SHARD_READS_AT_ONCE) {
      const shards = await Promise.all(
        Array.from({ length: Math.min(SHARD_READS_AT_ONCE, sharded.count - n) }, (_, i) => this.meta.get<ProjectShardDoc>(IndexSummaries.shardKey(indexName, sharded.generation, n + i))),
      );
      for (const shard of shards) if (shard) setCounts(all, shard.doc.projects);
    }
    return all;
  }

  /**
   * Counts one committed write of `indexName`. Writes of one index that arrive while its document
   * is being written are applied together by the next write (`updateDoc` groups them: one
   * compare-and-swap for the batch), so a process contends for the document with the other
   * processes only, never with itself: with P processes at most P writers race for it.
   */
  async record(indexName: string, change: SummaryChange = {}): Promise<void> {
    try {
      const { doc } = await updateDoc<IndexSummaryDoc>(this.meta, IndexSummaries.key(indexName), (current) => {
        const doc = current ?? empty();
        apply(doc, change);
        return doc;
      });
      // Sharded when this write was applied: its counts go to their shards.
      const sharded = doc?.projectShards;
      const due = sharded ? (await this.#writeShards(indexName, sharded, change.projects ?? {})) > GROW_AT && sharded.count < MAX_SHARDS : doc !== undefined && Object.keys(doc.projects).length > SHARD_AT;
      if (due) this.#moveSoon(indexName);
    } finally {
      await this.#tell(indexName, changedNames(change));
    }
  }

  /**
   * A move into (more) shards, in the background: once at a time per index in this process; a
   * failure waits for the next write that finds it due. `moved` resolves when none runs.
   */
  #moveSoon(indexName: string): void {
    if (this.#moves.has(indexName)) return;
    const move = this.#moveToShards(indexName, null)
      .catch(() => null)
      .finally(() => this.#moves.delete(indexName));
    this.#moves.set(indexName, move);
  }

  /** Resolves once no move of this process runs (for a clean stop, and the tests). */
  async moved(): Promise<void> {
    while (this.#moves.size > 0) await Promise.all(this.#moves.values());
  }

  /** Absolute counts into the shards: one update per shard touched. Returns the largest shard written. */
  async #writeShards(indexName: string, sharded: ProjectShards, counts: Record<string, number>): Promise<number> {
    const sizes = await Promise.all(
      [...byShard(counts, sharded.count)].map(async ([n, part]) => {
        const { doc } = await updateDoc<ProjectShardDoc>(this.meta, IndexSummaries.shardKey(indexName, sharded.generation, n), (current) => {
          const projects = { ...current?.projects };
          setCounts(projects, part);
          return { projects };
        });
        return Object.keys(doc?.projects ?? {}).length;
      }),
    );
    return Math.max(0, ...sizes);
  }

  /**
   * Moves the summary's projects (its map, or its shards into more of them; with `replace`, those
   * counts: a repair) into shards of a new generation, then points the summary to them by
   * compare-and-swap; returns the summary written. A write that changed the summary meanwhile
   * makes it start over from that summary; after `MOVE_ATTEMPTS` it gives up (the next write that
   * finds a move due tries again). The shards of a lost attempt, and of the generation replaced,
   * are deleted.
   */
  async #moveToShards(indexName: string, replace: { projects: Record<string, number>; recent: RecentUpload[]; scannedAt: string } | null): Promise<IndexSummaryDoc | null> {
    const key = IndexSummaries.key(indexName);
    for (let attempt = 0; attempt < MOVE_ATTEMPTS; attempt++) {
      const current = await this.meta.get<IndexSummaryDoc>(key);
      if (!replace && !current) return null;
      const projects = replace ? replace.projects : await this.projects(indexName, current?.doc ?? null);
      const count = shardsFor(Object.keys(projects).length);
      // Already where it should be (another process moved it first).
      if (!replace && current?.doc.projectShards && current.doc.projectShards.count >= count) return current.doc;
      const generation = randomBytes(6).toString('hex');
      const shards = byShard(projects, count);
      await Promise.all([...shards].map(([n, part]) => this.meta.put<ProjectShardDoc>(IndexSummaries.shardKey(indexName, generation, n), { projects: part })));
      const base = current?.doc ?? empty();
      const next: IndexSummaryDoc = {
        ...base,
        ...(replace ? { recent: capRecent(replace.recent), scannedAt: replace.scannedAt } : {}),
        projects: {},
        projectShards: { generation, count },
      };
      try {
        await this.meta.put(key, next, current ? current.version : null);
      } catch (err) {
        await this.#dropShards(indexName, generation, shards.keys());
        if (err instanceof ConflictError) continue;
        throw err;
      }
      const old = base.projectShards;
      if (old !== undefined) await this.#dropShards(indexName, old.generation, Array.from({ length: old.count }, (_, n) => n));
      return next;
    }
    return null;
  }

  /** Deletes shards no summary points to (best effort: a leftover is a few kilobytes nobody reads). */
  async #dropShards(indexName: string, generation: string, shards: Iterable<number>): Promise<void> {
    await Promise.all([...shards].map((n) => this.meta.delete(IndexSummaries.shardKey(indexName, generation, n)).catch(() => false)));
  }

  /** The listeners run after the write, whatever became of it; a listener's failure is its own. */
  async #tell(indexName: string, names: string[]): Promise<void> {
    if (names.length === 0) return;
    await Promise.all(this.#listeners.map(async (l) => {
      try {
        await l(indexName, names);
      } catch {
        // A listener keeps its own failures (the search index logs them); the write stands.
      }
    }));
  }

  /**
   * `record`, for writers whose own write has already committed: a failure is logged, not thrown
   * (the client's write succeeded; the next write of the project or a scan heals the summary).
   */
  async recordAfterCommit(indexName: string, change: SummaryChange, log: { warn(obj: object, msg: string): void }): Promise<void> {
    try {
      await this.record(indexName, change);
    } catch (err) {
      log.warn({ index: indexName, err: err instanceof Error ? err.message : String(err) }, 'status summary not updated');
    }
  }

  /**
   * A cached copy of `name` is served on after its upstream's delete since `since` (ms), or, with
   * null, no longer (the upstream has it again, or it was dropped). No serial moves.
   */
  async markKept(indexName: string, name: string, since: number | null): Promise<void> {
    await updateDoc<IndexSummaryDoc>(this.meta, IndexSummaries.key(indexName), (current) => {
      const listed = current?.kept && Object.hasOwn(current.kept, name);
      if (since === null) {
        if (!listed) return undefined;
        delete current!.kept![name];
        return current;
      }
      if (listed && current!.kept![name] === since) return undefined;
      const doc = current ?? empty();
      doc.kept ??= {};
      Object.defineProperty(doc.kept, name, { value: since, enumerable: true, writable: true, configurable: true });
      return doc;
    });
  }

  /**
   * Replaces what a scan can recount; the serial stays. Returns the repaired document (its
   * projects in it, or in new shards when there are more than `SHARD_AT`).
   */
  async repair(indexName: string, scanned: ScannedSummary, now = new Date()): Promise<IndexSummaryDoc> {
    const current = await this.read(indexName);
    if (Object.keys(scanned.projects).length > SHARD_AT || current?.projectShards !== undefined) {
      const moved = await this.#moveToShards(indexName, { ...scanned, scannedAt: now.toISOString() });
      if (moved) return moved;
    }
    const { doc } = await updateDoc<IndexSummaryDoc>(this.meta, IndexSummaries.key(indexName), (current) => ({
      serial: current?.serial ?? 0,
      ...(current?.kept ? { kept: current.kept } : {}),
      projects: scanned.projects,
      recent: capRecent(scanned.recent),
      scannedAt: now.toISOString(),
    }));
    return doc ?? { ...empty(), ...scanned };
  }
}
