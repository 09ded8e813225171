/**
 * An upstream page as our resolved project: the model every renderer uses. Files without a
 * sha256 are dropped: velodex serves every file content-addressed (`/files/{sha256}/...`) and
 * verifies what it caches, which it cannot do without the digest. Wheels the upstream lists
 * without a metadata sibling get one anyway (built from the wheel's METADATA on first request).
 */
import { normalizeVersion } from '../../model/pep440.js';
import { normalizeName } from '../../model/records.js';
import { assembleProject, pep700Time, type FileKind, type ResolvedFile, type ResolvedProject } from '../../model/resolved.js';
import type { UpstreamFile, UpstreamPage } from './upstream-page.js';

export interface CachedProject {
  resolved: ResolvedProject;
  /** The upstream's entry for each served filename. */
  upstream: ReadonlyMap<string, UpstreamFile>;
  /** Some served file has no size on the page (learnt sizes fill it in: `known-sizes.ts`). */
  unsized: boolean;
}

const SDIST_SUFFIXES = ['.tar.gz', '.tgz', '.tar.bz2', '.tbz', '.tar.xz', '.txz', '.tar.zst', '.tar', '.zip'];

/** What kind of distribution a filename is, and the version it names. */
export function describeFilename(filename: string, project: string): { kind: FileKind; version: string } {
  const lower = filename.toLowerCase();
  if (lower.endsWith('.whl') || lower.endsWith('.egg')) {
    // {name}-{version}-...: the name never contains a dash in these formats.
    const version = filename.split('-')[1] ?? '';
    return { kind: lower.endsWith('.whl') ? 'wheel' : 'egg', version };
  }
  const suffix = SDIST_SUFFIXES.find((s) => lower.endsWith(s));
  const stem = suffix ? filename.slice(0, -suffix.length) : filename.replace(/\.[A-Za-z0-9]+$/, '');
  // {name}-{version}: the name may contain dashes, so find the cut whose left side is the project.
  let version = '';
  for (let i = stem.indexOf('-'); i > 0; i = stem.indexOf('-', i + 1)) {
    if (normalizeName(stem.slice(0, i)) === project) {
      version = stem.slice(i + 1);
      break;
    }
  }
  if (version === '') version = stem.slice(stem.lastIndexOf('-') + 1);
  return { kind: suffix ? 'sdist' : 'other', version };
}

function resolveUpstreamFile(f: UpstreamFile & { sha256: string }, project: string): ResolvedFile {
  const { kind, version } = describeFilename(f.filename, project);
  const metadataSha256 = typeof f.metadata === 'object' ? f.metadata.sha256 : null;
  const file: ResolvedFile = {
    filename: f.filename,
    version: normalizeVersion(version) ?? version,
    kind,
    sha256: f.sha256,
    size: f.size,
    requiresPython: f.requiresPython,
    uploadTime: f.uploadTime === null ? null : pep700Time(f.uploadTime),
    yanked: f.yanked,
    metadataSha256,
  };
  if (metadataSha256 === null && (f.metadata === true || kind === 'wheel')) file.metadataUnhashed = true;
  const { sha256: _ignored, ...others } = f.hashes;
  if (Object.keys(others).length > 0) file.hashes = others;
  if (f.gpgSig !== undefined) file.gpgSig = f.gpgSig;
  if (f.provenance !== undefined) file.provenance = f.provenance;
  return file;
}

export function toCachedProject(page: UpstreamPage, normalized: string): CachedProject {
  const upstream = new Map<string, UpstreamFile>();
  const files: ResolvedFile[] = [];
  for (const f of page.files) {
    if (f.sha256 === null || upstream.has(f.filename)) continue;
    upstream.set(f.filename, f);
    files.push(resolveUpstreamFile({ ...f, sha256: f.sha256 }, normalized));
  }
  const resolved = assembleProject(page.name ?? normalized, normalized, files);
  if (page.status) resolved.status = page.status;
  if (page.versions) {
    const withFiles = new Set(resolved.releases.map((r) => r.version));
    // Only versions with no file at all upstream: a version whose files were all dropped or
    // filtered out must not be advertised.
    const listed = new Set(page.files.map((f) => normalizeVersion(describeFilename(f.filename, normalized).version) ?? ''));
    const extra = page.versions.filter((v) => !withFiles.has(normalizeVersion(v) ?? v) && !listed.has(normalizeVersion(v) ?? v));
    if (extra.length > 0) resolved.extraVersions = extra;
  }
  return { resolved, upstream, unsized: files.some((f) => f.size === null) };
}
