/**
 * The "resolved project": one in-memory view of a project record that every read renderer
 * (Simple HTML, Simple JSON, legacy JSON) is built from, so they cannot disagree about files,
 * hashes, sizes, upload times, yanked markers or requires-python.
 */
import { compareVersions, isPrerelease, normalizeVersion } from '../pep440.js';
import type { DistributionKind, ProjectRecord } from '../records.js';

export interface ResolvedFile {
  filename: string;
  /** The version as recorded for the file. */
  version: string;
  kind: DistributionKind;
  sha256: string;
  size: number;
  requiresPython: string | null;
  /** `yyyy-mm-ddThh:mm:ss.ffffffZ`, the PEP 700 spelling. */
  uploadTime: string;
  /** PEP 592: false, or the reason (possibly empty). */
  yanked: string | false;
  /** sha256 of the PEP 658 `.metadata` sibling, or null when there is none. */
  metadataSha256: string | null;
}

export interface ResolvedRelease {
  version: string;
  /** Sorted by filename. */
  files: ResolvedFile[];
  /** Every file of the release is yanked. */
  yanked: boolean;
}

export interface ResolvedProject {
  /** Display name (as first uploaded). */
  name: string;
  normalized: string;
  /** Oldest to newest by PEP 440; one entry per distinct version. */
  releases: ResolvedRelease[];
  /** Files in release order, then by filename: the order of the Simple detail page. */
  files: ResolvedFile[];
}

export function resolveProject(normalized: string, record: ProjectRecord): ResolvedProject {
  const byVersion = new Map<string, ResolvedFile[]>();
  for (const rec of Object.values(record.files)) {
    const file: ResolvedFile = {
      filename: rec.filename,
      version: rec.version,
      kind: rec.kind,
      sha256: rec.sha256,
      size: rec.size,
      requiresPython: rec.requiresPython ?? null,
      uploadTime: pep700Time(rec.uploadTime),
      yanked: typeof rec.yanked === 'string' ? rec.yanked : false,
      metadataSha256: rec.metadataSha256 ?? null,
    };
    // Group by normalized version so `1.0` and `1.0.0` do not become two releases.
    const key = normalizeVersion(rec.version) ?? rec.version;
    const list = byVersion.get(key);
    if (list) list.push(file);
    else byVersion.set(key, [file]);
  }
  const releases = [...byVersion.entries()]
    .map(([version, files]) => {
      files.sort((a, b) => (a.filename < b.filename ? -1 : a.filename > b.filename ? 1 : 0));
      return { version, files, yanked: files.every((f) => f.yanked !== false) };
    })
    .sort((a, b) => compareVersions(a.version, b.version));
  return { name: record.name, normalized, releases, files: releases.flatMap((r) => r.files) };
}

/**
 * The release installers would pick by default: the newest final release with a non-yanked file,
 * else the newest pre-release with one, else the newest of all. Null for a project with no files.
 */
export function latestRelease(project: ResolvedProject): ResolvedRelease | null {
  const live = project.releases.filter((r) => !r.yanked);
  const finals = live.filter((r) => !isPrerelease(r.version));
  return finals.at(-1) ?? live.at(-1) ?? project.releases.at(-1) ?? null;
}

export function findRelease(project: ResolvedProject, version: string): ResolvedRelease | null {
  const wanted = normalizeVersion(version) ?? version;
  return project.releases.find((r) => r.version === wanted) ?? null;
}

/** ISO 8601 UTC with six fraction digits, whatever precision the record kept. */
export function pep700Time(iso: string): string {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  const m = /\.(\d+)Z$/.exec(iso);
  const micros = m?.[1] ? m[1].padEnd(6, '0').slice(0, 6) : String(ms % 1000).padStart(3, '0') + '000';
  return `${new Date(ms).toISOString().slice(0, 19)}.${micros}Z`;
}
