/**
 * A virtual index's project merged from its members' resolved projects, in member order: files
 * are joined by filename (the first member that lists a filename wins), versions are the union.
 */
import { assembleProject, type ResolvedFile, type ResolvedProject } from '../../model/resolved.js';

export function mergeProjects(normalized: string, parts: readonly ResolvedProject[]): ResolvedProject {
  const byName = new Map<string, ResolvedFile>();
  for (const part of parts) for (const f of part.files) if (!byName.has(f.filename)) byName.set(f.filename, f);
  const first = parts[0];
  const merged = assembleProject(first?.name ?? normalized, normalized, byName.values());
  const status = parts.find((p) => p.status)?.status;
  if (status) merged.status = status;
  const extra = [...new Set(parts.flatMap((p) => p.extraVersions ?? []))];
  if (extra.length > 0) merged.extraVersions = extra;
  return merged;
}
