/**
 * Local state over files this server does not own: a cached index's files can be yanked and
 * hidden here without touching the cached upstream data. One MetaStore document per
 * (index, project) at `python/<index name>/overrides/<normalized name>`, keyed by filename. The
 * index is the one the mutation was addressed to (the virtual index, for a virtual route), and
 * the read side of that index applies the document to its resolved project with
 * `applyOverrides`. Hosted (uploaded) files never get overrides: their state is in the record.
 */
import type { MetaStore, ReadOptions } from '../../storage/types.js';
import { updateDoc } from '../../storage/update.js';
import type { ResolvedFile, ResolvedProject } from './resolved.js';
import { mapResolvedFiles } from './transform.js';

export interface FileOverride {
  /** A string (possibly empty) yanks with that reason; false un-yanks a file yanked upstream. */
  yanked?: string | false;
  /** Deleted through this index: left out of every page and download until restored. */
  hidden?: boolean;
}

export interface OverridesDoc {
  /** Keyed by filename. */
  files: Record<string, FileOverride>;
}

export interface LoadedOverrides {
  doc: OverridesDoc;
  /** Store version: part of the cache key of any page rendered with these overrides. */
  version: string;
}

export type OverrideAction = 'yank' | 'unyank' | 'delete' | 'restore';

export function overridesKey(indexName: string, normalized: string): string {
  return `python/${indexName}/overrides/${normalized}`;
}

export class ProjectOverrides {
  constructor(private readonly meta: MetaStore) {}

  async get(indexName: string, normalized: string, opts?: ReadOptions): Promise<LoadedOverrides | null> {
    const found = await this.meta.get<OverridesDoc>(overridesKey(indexName, normalized), opts);
    return found ? { doc: found.doc, version: found.version } : null;
  }

  /**
   * Applies `action` to `files` (the files in scope as the upstream serves them, before any
   * override) atomically; returns the filenames whose visible state changed.
   */
  async change(indexName: string, normalized: string, files: readonly ResolvedFile[], action: OverrideAction, reason = ''): Promise<string[]> {
    let changed: string[] = [];
    await updateDoc<OverridesDoc>(this.meta, overridesKey(indexName, normalized), (current) => {
      const result = applyAction(current, files, action, reason);
      changed = result.changed;
      return result.changed.length > 0 ? result.doc : undefined;
    });
    return changed;
  }
}

/** The resolved project as this index serves it: hidden files gone, yank state overridden. */
export function applyOverrides(project: ResolvedProject, overrides: OverridesDoc | null | undefined): ResolvedProject {
  if (!overrides || Object.keys(overrides.files).length === 0) return project;
  return mapResolvedFiles(project, (file) => {
    const o = overrides.files[file.filename];
    if (!o) return file;
    if (o.hidden) return null;
    return o.yanked === undefined ? file : { ...file, yanked: o.yanked };
  });
}

/**
 * The page-cache version of a page rendered from a project document plus overrides, so a change
 * to either re-renders it.
 */
export function withOverridesVersion(recordVersion: string, overrides: LoadedOverrides | null): string {
  return overrides ? `${recordVersion}+${overrides.version}` : recordVersion;
}

/** Pure: the new document and the files whose visible state changed. */
export function applyAction(
  current: OverridesDoc | undefined,
  files: readonly ResolvedFile[],
  action: OverrideAction,
  reason: string,
): { doc: OverridesDoc; changed: string[] } {
  const doc: OverridesDoc = current ?? { files: {} };
  const changed: string[] = [];
  for (const file of files) {
    const o: FileOverride = { ...doc.files[file.filename] };
    const hidden = o.hidden === true;
    const yanked = (o.yanked === undefined ? file.yanked : o.yanked) !== false;
    if (action === 'restore') {
      if (!hidden) continue;
      delete o.hidden;
    } else if (hidden) {
      // Yank state and deletion apply to visible files only.
      continue;
    } else if (action === 'delete') {
      o.hidden = true;
    } else if (action === 'yank') {
      if (yanked) continue;
      o.yanked = reason;
    } else {
      if (!yanked) continue;
      // Drop our own yank; an upstream yank needs an explicit un-yank.
      if (typeof o.yanked === 'string' && file.yanked === false) delete o.yanked;
      else o.yanked = false;
    }
    changed.push(file.filename);
    if (Object.keys(o).length === 0) delete doc.files[file.filename];
    else doc.files[file.filename] = o;
  }
  return { doc, changed };
}
