/**
 * The "resolved project": one in-memory view of a project record that every read renderer
 * (Simple HTML, Simple JSON, legacy JSON) is built from, so they cannot disagree about files,
 * hashes, sizes, upload times, yanked markers or requires-python.
 */
import { compareVersions, isPrerelease, normalizeVersion } from './pep440.js';
import type { DistributionKind, FileRecord, ProjectRecord } from './records.js';

/** Hosted files are wheels or sdists; a cached upstream may also list eggs and older formats. */
export type FileKind = DistributionKind | 'egg' | 'other';

export interface ResolvedFile {
  filename: string;
  /** The version as recorded for the file. */
  version: string;
  kind: FileKind;
  sha256: string;
  /** Null when an upstream page did not say (PEP 503 HTML carries no sizes). */
  size: number | null;
  requiresPython: string | null;
  /** `yyyy-mm-ddThh:mm:ss.ffffffZ`, the PEP 700 spelling; null when an upstream did not say. */
  uploadTime: string | null;
  /** PEP 592: false, or the reason (possibly empty). */
  yanked: string | false;
  /** sha256 of the PEP 658 `.metadata` sibling, or null when there is none (or its hash is unknown). */
  metadataSha256: string | null;
  /** A `.metadata` sibling is served though its hash is not known in advance (advertised as `true`). */
  metadataUnhashed?: boolean;
  /** PEP 740 provenance URL, as an upstream gave it (absolute). */
  provenance?: string | null;
  /** Whether an upstream said a detached GPG signature exists. */
  gpgSig?: boolean;
  /** Other hashes an upstream advertised (md5, blake2b_256, ...), by algorithm. */
  hashes?: Record<string, string>;
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
  /** PEP 792 status as an upstream gave it; absent means `active`. */
  status?: { status: string; reason?: string };
  /** Versions an upstream lists without any file (PEP 700 `versions`), joined into `versions`. */
  extraVersions?: string[];
}

export function resolveProject(normalized: string, record: ProjectRecord): ResolvedProject {
  return assembleProject(record.name, normalized, Object.values(record.files).map(resolveFile));
}

/** One hosted file record as the renderers see it. */
export function resolveFile(rec: FileRecord): ResolvedFile {
  return {
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
}

/** Groups files into releases (sorted by PEP 440) and orders them as the detail page lists them. */
export function assembleProject(name: string, normalized: string, files: Iterable<ResolvedFile>): ResolvedProject {
  const byVersion = new Map<string, ResolvedFile[]>();
  for (const file of files) {
    // Group by normalized version so `1.0` and `1.0.0` do not become two releases.
    const key = normalizeVersion(file.version) ?? file.version;
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
  return { name, normalized, releases, files: releases.flatMap((r) => r.files) };
}

/** PEP 700 `versions`: every release, plus versions an upstream lists without files. */
export function projectVersions(project: ResolvedProject): string[] {
  const versions = project.releases.map((r) => r.version);
  if (!project.extraVersions?.length) return versions;
  const all = new Set(versions);
  for (const v of project.extraVersions) all.add(normalizeVersion(v) ?? v);
  return [...all].sort(compareVersions);
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

/** The release named `version`: its normalized spelling, else one PEP 440 deems equal (`1.1.0` is `1.1`). */
export function findRelease(project: ResolvedProject, version: string): ResolvedRelease | null {
  const wanted = normalizeVersion(version) ?? version;
  return project.releases.find((r) => r.version === wanted) ?? project.releases.find((r) => compareVersions(r.version, wanted) === 0) ?? null;
}

/** ISO 8601 UTC with six fraction digits, whatever precision the record kept. */
export function pep700Time(iso: string): string {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  const m = /\.(\d+)Z$/.exec(iso);
  const micros = m?.[1] ? m[1].padEnd(6, '0').slice(0, 6) : String(ms % 1000).padStart(3, '0') + '000';
  return `${new Date(ms).toISOString().slice(0, 19)}.${micros}Z`;
}
