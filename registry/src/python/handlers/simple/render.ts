/**
 * Simple API renderers: PEP 503 HTML and PEP 691 JSON for the project list and the project
 * detail page, with the PEP 592 (yanked), 658/714 (core metadata), 700 (versions, size,
 * upload-time) and 792 (project status) fields, at API version 1.4.
 */
import { escapeHtml } from './html.js';
import { projectVersions, type ResolvedFile, type ResolvedProject } from '../../model/resolved.js';

export const API_VERSION = '1.4';

/**
 * File links are relative to the detail page (`/{route}/simple/{project}/`), so they keep
 * working behind a proxy that mounts the server under another prefix; pip and uv both resolve
 * them against the page URL.
 */
export function fileHref(file: ResolvedFile): string {
  return `../../files/${file.sha256}/${encodeURIComponent(file.filename)}`;
}

export function renderProjectListHtml(names: readonly string[]): string {
  const links = names.map((n) => `    <a href="${escapeHtml(encodeURIComponent(n))}/">${escapeHtml(n)}</a><br>\n`).join('');
  return (
    '<!DOCTYPE html>\n<html>\n  <head>\n' +
    `    <meta name="pypi:repository-version" content="${API_VERSION}">\n` +
    '    <title>Simple index</title>\n  </head>\n  <body>\n' +
    links +
    '  </body>\n</html>\n'
  );
}

export function renderProjectListJson(names: readonly string[]): string {
  return JSON.stringify({ meta: { 'api-version': API_VERSION }, projects: names.map((name) => ({ name })) });
}

export function renderDetailHtml(project: ResolvedProject): string {
  const name = escapeHtml(project.name);
  const links = project.files
    .map((f) => {
      const attrs = [`href="${escapeHtml(fileHref(f))}#sha256=${f.sha256}"`];
      if (f.requiresPython !== null) attrs.push(`data-requires-python="${escapeHtml(f.requiresPython)}"`);
      const metadata = f.metadataSha256 !== null ? `sha256=${f.metadataSha256}` : f.metadataUnhashed ? 'true' : null;
      if (metadata !== null) {
        // PEP 714 renamed the attribute; older pip only reads the PEP 658 spelling.
        attrs.push(`data-dist-info-metadata="${metadata}"`, `data-core-metadata="${metadata}"`);
      }
      if (f.gpgSig !== undefined) attrs.push(`data-gpg-sig="${f.gpgSig ? 'true' : 'false'}"`);
      if (f.yanked !== false) attrs.push(`data-yanked="${escapeHtml(f.yanked)}"`);
      if (f.provenance) attrs.push(`data-provenance="${escapeHtml(f.provenance)}"`);
      return `    <a ${attrs.join(' ')}>${escapeHtml(f.filename)}</a><br>\n`;
    })
    .join('');
  return (
    '<!DOCTYPE html>\n<html>\n  <head>\n' +
    `    <meta name="pypi:repository-version" content="${API_VERSION}">\n` +
    `    <meta name="pypi:project-status" content="${escapeHtml(project.status?.status ?? 'active')}">\n` +
    (project.status?.reason ? `    <meta name="pypi:project-status-reason" content="${escapeHtml(project.status.reason)}">\n` : '') +
    `    <title>Links for ${name}</title>\n  </head>\n  <body>\n` +
    `    <h1>Links for ${name}</h1>\n` +
    links +
    '  </body>\n</html>\n'
  );
}

export function renderDetailJson(project: ResolvedProject): string {
  const metadata = (f: ResolvedFile) => (f.metadataSha256 !== null ? { sha256: f.metadataSha256 } : f.metadataUnhashed === true);
  return JSON.stringify({
    meta: { 'api-version': API_VERSION },
    // PEP 691: the normalized name (the display name stays in the HTML title and legacy JSON).
    name: project.normalized,
    'project-status': project.status ?? { status: 'active' },
    versions: projectVersions(project),
    files: project.files.map((f) => ({
      filename: f.filename,
      url: fileHref(f),
      hashes: { ...f.hashes, sha256: f.sha256 },
      'requires-python': f.requiresPython,
      // Left out, not null, when an upstream page did not say (PEP 503 HTML carries neither).
      ...(f.size !== null ? { size: f.size } : {}),
      ...(f.uploadTime !== null ? { 'upload-time': f.uploadTime } : {}),
      // PEP 691: true for a yank without a reason, the reason string otherwise.
      yanked: f.yanked === false ? false : f.yanked === '' ? true : f.yanked,
      'core-metadata': metadata(f),
      'dist-info-metadata': metadata(f),
      ...(f.gpgSig !== undefined ? { 'gpg-sig': f.gpgSig } : {}),
      ...(f.provenance !== undefined ? { provenance: f.provenance } : {}),
    })),
  });
}
