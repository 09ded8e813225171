/**
 * Derives a resolved project from another: per-file changes (policy filters, cached-file
 * overrides) with the releases regrouped, so a release whose files are all gone disappears from
 * every renderer, PEP 691 `versions` included.
 */
import { normalizeVersion } from './pep440.js';
import type { ResolvedFile, ResolvedProject } from './resolved.js';

/** `change` returns the file (possibly altered) or null to drop it. */
export function mapResolvedFiles(project: ResolvedProject, change: (file: ResolvedFile) => ResolvedFile | null): ResolvedProject {
  const dropped = new Set<string>();
  const releases = project.releases.flatMap((release) => {
    const files = release.files.flatMap((f) => {
      const next = change(f);
      return next ? [next] : [];
    });
    if (files.length === 0) dropped.add(release.version);
    return files.length === 0 ? [] : [{ version: release.version, files, yanked: files.every((f) => f.yanked !== false) }];
  });
  const next: ResolvedProject = { ...project, releases, files: releases.flatMap((r) => r.files) };
  // A version whose every file is gone must not come back through an upstream's `versions` list.
  const extra = project.extraVersions?.filter((v) => !dropped.has(normalizeVersion(v) ?? v));
  if (extra) next.extraVersions = extra;
  return next;
}
