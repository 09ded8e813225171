/**
 * What the Python ecosystem contributes to `/+status` and `/+stats` (the `describe`, `scanIndex`
 * and `projectKey` hooks of `Ecosystem`), and how its writes keep the per-index summary current
 * (observe/summary.ts): after a write commits, the project's file count is read back from its
 * record (an absolute value, so a lost update heals with the next write).
 */
import type { IndexConfig } from '../config/types.js';
import type { Ecosystem } from '../ecosystem/ecosystem.js';
import type { IndexSummaries, RecentUpload, ScannedSummary } from '../observe/summary.js';
import { CachedSource } from './read/cached/source.js';
import { isValidProjectName, normalizeName, type ProjectRecord, type ProjectRecords } from './model/records.js';
import type { SourceLookup } from './read/source/types.js';

type Log = { warn(obj: object, msg: string): void };

export function pythonStatus(lookup: SourceLookup, records: ProjectRecords): Pick<Ecosystem, 'describe' | 'scanIndex' | 'projectKey'> {
  return {
    describe(index) {
      const source = lookup(index.name);
      return {
        terms: { project: 'project', file: 'file' },
        ...(source instanceof CachedSource ? { upstreamOffline: source.upstreams.offline, upstreams: source.upstreams.reports() } : {}),
      };
    },
    scanIndex: (index) => scanPythonIndex(records, index),
    projectKey: (name) => (isValidProjectName(name) ? normalizeName(name) : null),
  };
}

/** One pass over the index's project records: file counts and every upload, newest kept. */
async function scanPythonIndex(records: ProjectRecords, index: IndexConfig): Promise<ScannedSummary> {
  const projects: Record<string, number> = {};
  const recent: RecentUpload[] = [];
  for (const normalized of await records.listRecords(index.name)) {
    const found = await records.get(index.name, normalized);
    if (!found) continue;
    projects[normalized] = Object.keys(found.record.files).length;
    recent.push(...uploadsOf(index.name, normalized, found.record));
  }
  return { projects, recent };
}

function uploadsOf(indexName: string, normalized: string, record: ProjectRecord): RecentUpload[] {
  return Object.values(record.files).map((f) => ({ time: f.uploadTime, index: indexName, project: normalized, version: f.version, filename: f.filename, ...(f.uploadedBy ? { by: f.uploadedBy } : {}) }));
}

/**
 * Records one committed write of a hosted index's project in its summary: the project's file
 * count as stored now, and the files this write uploaded (filenames), for the recent list.
 */
export async function recordProjectWrite(summaries: IndexSummaries, records: ProjectRecords, indexName: string, normalized: string, log: Log, uploaded: string[] = []): Promise<void> {
  let files: ProjectRecord['files'];
  try {
    files = (await records.get(indexName, normalized))?.record.files ?? {};
  } catch (err) {
    // Without the count, the serial still moves; the project's count heals with its next write.
    log.warn({ index: indexName, project: normalized, err: err instanceof Error ? err.message : String(err) }, 'status summary: project not read back');
    await summaries.recordAfterCommit(indexName, {}, log);
    return;
  }
  const uploads = uploaded.flatMap((name) => {
    const f = files[name];
    return f ? [{ time: f.uploadTime, index: indexName, project: normalized, version: f.version, filename: f.filename, ...(f.uploadedBy ? { by: f.uploadedBy } : {}) }] : [];
  });
  await summaries.recordAfterCommit(indexName, { projects: { [normalized]: Object.keys(files).length }, uploads }, log);
}
