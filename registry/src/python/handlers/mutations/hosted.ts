/**
 * Mutations of uploaded files, in the hosted index's project record: yank and un-yank (PEP 592)
 * set or clear `yanked`; delete removes the file from the record (the caller checks that the
 * index is volatile). Blobs stay: they are content-addressed and may be shared with other
 * indexes. Every change is one compare-and-swap update, so concurrent uploads and mutations of
 * the project never lose each other.
 */
import { type FileRecord, type ProjectRecord, type ProjectRecords } from '../../model/records.js';

export type RecordAction = 'yank' | 'unyank' | 'delete';

/** Applies `action` to the files of `current` that `inScope` selects; returns the changed filenames. */
export function changeRecord(
  current: ProjectRecord,
  inScope: (file: FileRecord) => boolean,
  action: RecordAction,
  reason: string,
): string[] {
  const changed: string[] = [];
  for (const file of Object.values(current.files)) {
    if (!inScope(file)) continue;
    const yanked = typeof file.yanked === 'string';
    if (action === 'yank' && !yanked) file.yanked = reason;
    else if (action === 'unyank' && yanked) delete file.yanked;
    else if (action === 'delete') delete current.files[file.filename];
    else continue;
    changed.push(file.filename);
  }
  return changed;
}

export async function mutateRecord(
  records: ProjectRecords,
  indexName: string,
  normalized: string,
  inScope: (file: FileRecord) => boolean,
  action: RecordAction,
  reason: string,
): Promise<string[]> {
  let changed: string[] = [];
  const result = await records.update(indexName, normalized, (current) => {
    if (!current) {
      changed = [];
      return undefined;
    }
    changed = changeRecord(current, inScope, action, reason);
    return changed.length > 0 ? current : undefined;
  });
  if (action === 'delete' && result.changed && result.doc && Object.keys(result.doc.files).length === 0) {
    await records.dropIfEmpty(indexName, normalized);
  }
  return changed;
}
