/**
 * What a hosted Python index stores about its projects, and the one place that reads and writes
 * it. One MetaStore document per project at `python/<index name>/projects/<normalized name>`;
 * artifact bytes and core-metadata bytes are blobs in the shared BlobStore, addressed by sha256,
 * held by the index's holder (`pythonHolder`). The document's store version changes on every
 * write, so it doubles as the cache key of rendered pages.
 *
 * The project names of an index are also kept in one document, `python/<index name>/names`
 * (storage/name-set.ts), so the project list (`/simple/`) reads one document instead of listing
 * the records: every committed record write adds its name (one read when it is there already).
 * A record whose last file was deleted is removed (`dropIfEmpty`), and its name after it.
 */
import { NameSet, type NameSetView } from '../../storage/name-set.js';
import { ConflictError, type MetaStore, type ReadOptions } from '../../storage/types.js';
import { updateDoc } from '../../storage/update.js';

/**
 * The LEGACY holder: earlier versions held every Python blob under this one name, for every
 * index. Nothing writes it any more; its holds stay while any Python document references their
 * digest (python/lifecycle.ts), and it belongs to no single index.
 */
export const PYTHON_HOLDER = 'python';

/**
 * The holder (storage/holds.ts) under which a Python index holds the shared blobs it stores:
 * `python.<index name>` (an index name is a valid holder segment). Every write holds for the
 * index it writes to (an upload and a promotion for the target, a cached file for its cached
 * index), so the holds say which indexes hold a digest (accounting, quotas). Python never
 * releases a hold itself; the garbage collector does, once no document of the index names it.
 */
export function pythonHolder(indexName: string): string {
  return `${PYTHON_HOLDER}.${indexName}`;
}

/** `python.<index>` -> `<index>`; null for the legacy `python` (every index's) and for any other name. */
export function pythonHolderIndex(holder: string): string | null {
  if (!holder.startsWith(`${PYTHON_HOLDER}.`)) return null;
  const index = holder.slice(PYTHON_HOLDER.length + 1);
  return index === '' || index.includes('/') ? null : index;
}

export type DistributionKind = 'wheel' | 'sdist';

export interface FileRecord {
  filename: string;
  /** The version as the file names it (canonical PEP 440 string from the metadata). */
  version: string;
  kind: DistributionKind;
  /** sha256 hex of the artifact bytes: also its blob digest. */
  sha256: string;
  size: number;
  /** `Requires-Python` from the core metadata, if any. */
  requiresPython?: string;
  /** ISO 8601 UTC with a `Z`, when the upload was accepted. */
  uploadTime: string;
  /** Which credential uploaded it: `upload_token` or `token:<name>` (access/tokens.ts); absent before it was kept. */
  uploadedBy?: string;
  /** sha256 hex of the core metadata (wheel METADATA, sdist PKG-INFO): the `.metadata` sibling's blob. */
  metadataSha256?: string;
  /** PEP 592: absent or false when not yanked; a string (possibly empty) is the reason. */
  yanked?: string | false;
}

export interface ProjectRecord {
  /** The project name as first uploaded (display form). */
  name: string;
  /** Keyed by filename. */
  files: Record<string, FileRecord>;
}

const PROJECT_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$/;
/** Longer names than this are refused: they would not fit a file name in the store. */
const MAX_PROJECT_NAME = 200;

/** A name PEP 508 allows (so a project by that name can exist at all). */
export function isValidProjectName(name: string): boolean {
  return name.length <= MAX_PROJECT_NAME && PROJECT_NAME.test(name);
}

/** PEP 503 normalisation. */
export function normalizeName(name: string): string {
  return name.replace(/[-_.]+/g, '-').toLowerCase();
}

export function projectKey(indexName: string, normalized: string): string {
  return `python/${indexName}/projects/${normalized}`;
}

export class ProjectRecords {
  constructor(private readonly meta: MetaStore) {}

  /** `opts.recent`: a request's read (`ReadOptions`); write paths read without it. */
  async get(indexName: string, normalized: string, opts?: ReadOptions): Promise<{ record: ProjectRecord; version: string } | null> {
    const found = await this.meta.get<ProjectRecord>(projectKey(indexName, normalized), opts);
    return found ? { record: found.doc, version: found.version } : null;
  }

  /**
   * Normalised names of every project of the index, sorted, with the store version of the names
   * document. One read; no listing except to build the document once when it is absent.
   */
  names(indexName: string, opts?: ReadOptions): Promise<NameSetView> {
    return this.#names(indexName).read(opts);
  }

  /** Normalised names of every project, from a listing of the records (scans and repairs only). */
  async listRecords(indexName: string): Promise<string[]> {
    const prefix = `python/${indexName}/projects`;
    const names: string[] = [];
    for await (const key of this.meta.list(prefix)) names.push(key.slice(prefix.length + 1));
    return names.sort();
  }

  #names(indexName: string): NameSet {
    return new NameSet(this.meta, `python/${indexName}/names`, () => this.listRecords(indexName));
  }

  /**
   * Atomically changes one project's record (compare-and-swap with retries). `change` gets the
   * current record or undefined, returns the new one or undefined for no change; it may run
   * several times, so it must not have side effects.
   */
  async update(
    indexName: string,
    normalized: string,
    change: (current: ProjectRecord | undefined) => ProjectRecord | undefined,
  ): Promise<{ doc: ProjectRecord | undefined; changed: boolean }> {
    const result = await updateDoc<ProjectRecord>(this.meta, projectKey(indexName, normalized), change);
    // Also when unchanged but present: heals a name left out by a writer that died after its record.
    if (result.doc) await this.#names(indexName).add(normalized);
    return result;
  }

  /** A project whose last file was deleted disappears from the list, unless an upload just refilled it. */
  async dropIfEmpty(indexName: string, normalized: string): Promise<void> {
    const key = projectKey(indexName, normalized);
    const found = await this.meta.get<ProjectRecord>(key);
    if (!found || Object.keys(found.doc.files).length > 0) return;
    try {
      await this.meta.delete(key, found.version);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      return;
    }
    await this.#names(indexName).remove(normalized, async () => (await this.meta.get(key)) !== null);
  }
}
