/**
 * Legacy JSON documents (`/{route}/{project}/json`, `/{route}/{project}/{version}/json`) in the
 * shape PyPI's JSON API uses, built from the same resolved project as the Simple detail page.
 * Fields only an upload form or PyPI's database could supply are null, empty, 0 or -1.
 */
import type { FileKind, ResolvedFile, ResolvedProject, ResolvedRelease } from '../../model/resolved.js';
import { compareVersions, normalizeVersion } from '../../model/pep440.js';
import { findRelease, latestRelease, projectVersions } from '../../model/resolved.js';

/** Absolute URLs are built from this (the origin the client used, plus the index route). */
export interface UrlBase {
  /** `http://host:port` */
  origin: string;
  route: string;
}

function fileUrl(base: UrlBase, f: ResolvedFile): string {
  return `${base.origin}/${base.route}/files/${f.sha256}/${encodeURIComponent(f.filename)}`;
}

function fileEntry(base: UrlBase, f: ResolvedFile): Record<string, unknown> {
  return {
    comment_text: null,
    digests: { blake2b_256: f.hashes?.blake2b_256 ?? null, md5: f.hashes?.md5 ?? null, sha256: f.sha256 },
    downloads: -1,
    filename: f.filename,
    has_sig: f.gpgSig ?? false,
    md5_digest: f.hashes?.md5 ?? null,
    packagetype: PACKAGE_TYPE[f.kind],
    python_version: f.kind === 'wheel' ? wheelPythonTag(f.filename) : 'source',
    requires_python: f.requiresPython,
    size: f.size,
    // PyPI's two spellings: naive UTC seconds, and ISO 8601 with the zone.
    upload_time: f.uploadTime?.slice(0, 19) ?? null,
    upload_time_iso_8601: f.uploadTime,
    url: fileUrl(base, f),
    yanked: f.yanked !== false,
    yanked_reason: f.yanked === false || f.yanked === '' ? null : f.yanked,
  };
}

const PACKAGE_TYPE: Record<FileKind, string> = { wheel: 'bdist_wheel', sdist: 'sdist', egg: 'bdist_egg', other: 'bdist_dumb' };

function wheelPythonTag(filename: string): string {
  const parts = filename.slice(0, -'.whl'.length).split('-');
  return parts.at(-3) ?? 'py3';
}

function info(base: UrlBase, project: ResolvedProject, release: ResolvedRelease | null): Record<string, unknown> {
  const simpleUrl = `${base.origin}/${base.route}/simple/${project.normalized}/`;
  const yankedReason = release?.yanked ? (release.files.find((f) => f.yanked)?.yanked ?? null) : null;
  return {
    author: null,
    author_email: null,
    bugtrack_url: null,
    classifiers: [],
    description: '',
    description_content_type: null,
    docs_url: null,
    download_url: null,
    downloads: { last_day: -1, last_month: -1, last_week: -1 },
    dynamic: null,
    home_page: null,
    keywords: null,
    license: null,
    license_expression: null,
    license_files: null,
    maintainer: null,
    maintainer_email: null,
    name: project.name,
    package_url: simpleUrl,
    platform: null,
    project_url: simpleUrl,
    project_urls: null,
    provides_extra: null,
    release_url: release ? `${base.origin}/${base.route}/${project.normalized}/${encodeURIComponent(release.version)}/json` : null,
    requires_dist: null,
    requires_python: release?.files.find((f) => f.requiresPython !== null)?.requiresPython ?? null,
    summary: null,
    version: release?.version ?? null,
    yanked: release?.yanked ?? false,
    yanked_reason: yankedReason === '' ? null : yankedReason,
  };
}

export function renderProjectJson(base: UrlBase, project: ResolvedProject): string {
  const latest = latestRelease(project);
  // Every version the Simple page lists (PEP 700 `versions`), a version without files as [] as on PyPI.
  const files = new Map(project.releases.map((r) => [r.version, r.files]));
  const releases: Record<string, unknown[]> = {};
  for (const v of projectVersions(project)) releases[v] = (files.get(v) ?? []).map((f) => fileEntry(base, f));
  return JSON.stringify({
    info: info(base, project, latest),
    last_serial: -1,
    releases,
    urls: latest ? latest.files.map((f) => fileEntry(base, f)) : [],
    vulnerabilities: [],
  });
}

/** A version the page lists without files (an upstream's `versions`), as an empty release. */
function fileless(project: ResolvedProject, version: string): ResolvedRelease | null {
  const wanted = normalizeVersion(version) ?? version;
  const listed = projectVersions(project).find((v) => v === wanted || compareVersions(v, wanted) === 0);
  return listed === undefined ? null : { version: listed, files: [], yanked: false };
}

/** Null when the project has no such version. */
export function renderReleaseJson(base: UrlBase, project: ResolvedProject, version: string): string | null {
  const release = findRelease(project, version) ?? fileless(project, version);
  if (!release) return null;
  const files = release.files.map((f) => fileEntry(base, f));
  return JSON.stringify({
    info: info(base, project, release),
    last_serial: -1,
    releases: { [release.version]: files },
    urls: files,
    vulnerabilities: [],
  });
}
