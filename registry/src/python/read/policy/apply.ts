/**
 * Index policy on the Python read side, applied before any bytes leave the server: the project
 * list omits blocked projects, a project-level block answers 403 with the denial object, detail
 * pages (Simple and legacy JSON) omit blocked files, and downloads of blocked files answer 403.
 */
import type { IndexConfig } from '../../../config/types.js';
import { PolicyDenialError } from '../../../policy/denial.js';
import type { FileFacts } from '../../../policy/rules.js';
import type { ResolvedFile, ResolvedProject } from '../../model/resolved.js';
import { mapResolvedFiles } from '../../model/transform.js';
import { readPolicy } from './effective.js';

/** Normalized names the index may list. */
export function visibleProjects(index: IndexConfig, names: readonly string[]): string[] {
  const policy = readPolicy(index);
  return policy.empty ? [...names] : names.filter((n) => policy.allowsProject(n));
}

/** Throws the 403 denial when a project-level rule blocks the whole project. */
export function assertProjectServable(index: IndexConfig, normalized: string): void {
  const denial = readPolicy(index).projectDenial('serve', normalized);
  if (denial) throw new PolicyDenialError(denial);
}

/** Throws the 403 denial when a rule blocks downloading this file. */
export function assertFileServable(index: IndexConfig, normalized: string, file: FileFacts): void {
  const denial = readPolicy(index).denial('serve', normalized, file);
  if (denial) throw new PolicyDenialError(denial);
}

/** The project without the files that a file-level rule blocks (releases left empty go too). */
export function servableFiles(index: IndexConfig, project: ResolvedProject, now = Date.now()): ResolvedProject {
  const policy = readPolicy(index);
  if (policy.maxFileSize === undefined && policy.minReleaseAgeSecs === undefined) return project;
  return mapResolvedFiles(project, (f) => (policy.fileDenial('serve', project.normalized, resolvedFacts(f), now) ? null : f));
}

/**
 * A listed file's facts. A cached upstream's HTML page may not give size or upload time: an
 * unknown size passes the page filter until velodex learns it (the download is judged by its
 * real size: see `size-guard.ts`), an unknown upload time is left out.
 */
export function resolvedFacts(f: ResolvedFile): FileFacts {
  return { filename: f.filename, version: f.version, size: f.size, ...(f.uploadTime !== null ? { uploadTime: f.uploadTime } : {}) };
}

/**
 * What a cached rendered page must also be keyed by: with `min-release-age` the set of servable
 * files changes as time passes, so pages are re-rendered once per time slot (at most a minute;
 * a file may show up that much later than its download is allowed, never earlier).
 */
export function policyPageVariant(index: IndexConfig, now = Date.now()): string {
  const age = readPolicy(index).minReleaseAgeSecs;
  if (age === undefined || age === 0) return '';
  const slotMs = Math.max(1000, Math.min(60_000, age * 100));
  return `\nage-slot:${Math.floor(now / slotMs)}`;
}
