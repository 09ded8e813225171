/**
 * An upstream project page (PEP 691 JSON or PEP 503 HTML) read into one model that keeps every
 * field the Simple API carries: hashes, requires-python, yanked, core metadata, size,
 * upload-time, gpg-sig, provenance, versions and project status. File URLs are made absolute
 * against the page URL and kept, so a download can find the bytes upstream.
 */
import { urlWithoutCredentials } from '../../../config/sanitize.js';
import { readHtmlLinks } from './html-links.js';

export interface UpstreamFile {
  filename: string;
  /** Absolute upstream URL of the bytes, fragment removed. Never shown to clients or logs. */
  url: string;
  /** Lowercase hex, or null when the upstream gave none (such files are not served). */
  sha256: string | null;
  /** Other hashes the upstream gave, by algorithm. */
  hashes: Record<string, string>;
  requiresPython: string | null;
  yanked: string | false;
  /** The upstream's `.metadata` sibling: none, present with an unknown hash, or its sha256. */
  metadata: false | true | { sha256: string };
  size: number | null;
  uploadTime: string | null;
  gpgSig?: boolean;
  /** Sanitized absolute URL, or null when the upstream says there is none. */
  provenance?: string | null;
}

export interface UpstreamPage {
  /** Display name, when the upstream said it. */
  name: string | null;
  files: UpstreamFile[];
  /** PEP 700 `versions`, when the upstream gave them. */
  versions: string[] | null;
  status?: { status: string; reason?: string };
}

const SHA256 = /^[0-9a-f]{64}$/;
const JSON_TYPE = /application\/vnd\.pypi\.simple\.[^;]*\+json|application\/json/i;

/** Parses `body` by its content type (sniffing when the type is missing or generic). */
export function parseUpstreamPage(body: Buffer, contentType: string | undefined, pageUrl: string): UpstreamPage {
  const text = body.toString('utf8');
  const looksJson = contentType ? JSON_TYPE.test(contentType) : /^\s*\{/.test(text);
  return looksJson ? parseJsonPage(text, pageUrl) : parseHtmlPage(text, pageUrl);
}

function absolute(href: string, base: string): { url: string; fragment: string } | null {
  try {
    const u = new URL(href, base);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    const fragment = u.hash.slice(1);
    u.hash = '';
    return { url: u.toString(), fragment };
  } catch {
    return null;
  }
}

function lastSegment(url: string): string {
  try {
    return decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '');
  } catch {
    return '';
  }
}

/** A filename safe to serve under `/files/{sha256}/{filename}`. */
function safeFilename(name: string): boolean {
  if (name === '' || name === '.' || name === '..' || name.length > 255 || /[/\\]/.test(name)) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return false;
  }
  return true;
}

function lowerHex(hashes: Record<string, string>): string | null {
  const v = hashes.sha256?.toLowerCase();
  return v !== undefined && SHA256.test(v) ? v : null;
}

// ---- PEP 503 HTML

function parseHtmlMetadata(value: string | undefined): UpstreamFile['metadata'] {
  if (value === undefined || value.toLowerCase() === 'false') return false;
  const m = /^sha256=([0-9a-fA-F]{64})$/.exec(value.trim());
  return m ? { sha256: m[1]!.toLowerCase() } : true;
}

function parseHtmlPage(html: string, pageUrl: string): UpstreamPage {
  const { anchors, meta, title } = readHtmlLinks(html);
  const files: UpstreamFile[] = [];
  for (const a of anchors) {
    const href = a.attrs.get('href');
    if (href === undefined) continue;
    const abs = absolute(href, pageUrl);
    if (!abs) continue;
    const filename = a.text !== '' ? a.text : lastSegment(abs.url);
    if (!safeFilename(filename)) continue;
    const hashes: Record<string, string> = {};
    const [algo, value] = abs.fragment.split('=', 2);
    if (algo && value) hashes[algo.toLowerCase()] = value.toLowerCase();
    const yanked = a.attrs.get('data-yanked');
    const gpg = a.attrs.get('data-gpg-sig');
    const provenance = a.attrs.get('data-provenance');
    const file: UpstreamFile = {
      filename,
      url: abs.url,
      sha256: lowerHex(hashes),
      hashes,
      requiresPython: a.attrs.get('data-requires-python') ?? null,
      yanked: yanked ?? false,
      metadata: parseHtmlMetadata(a.attrs.get('data-core-metadata') ?? a.attrs.get('data-dist-info-metadata')),
      size: null,
      uploadTime: null,
    };
    if (gpg !== undefined) file.gpgSig = gpg.toLowerCase() === 'true';
    if (provenance !== undefined) file.provenance = provenanceUrl(provenance, pageUrl);
    files.push(file);
  }
  const status = meta.get('pypi:project-status');
  const reason = meta.get('pypi:project-status-reason');
  const name = title ? /^Links for (.+)$/i.exec(title)?.[1]?.trim() ?? null : null;
  return { name, files, versions: null, ...(status ? { status: { status, ...(reason ? { reason } : {}) } } : {}) };
}

// ---- PEP 691 JSON

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function obj(v: Json | undefined): { [k: string]: Json } | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : null;
}

function str(v: Json | undefined): string | null {
  return typeof v === 'string' ? v : null;
}

function stringMap(v: Json | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(obj(v) ?? {})) if (typeof x === 'string') out[k.toLowerCase()] = x.toLowerCase();
  return out;
}

function jsonMetadata(v: Json | undefined): UpstreamFile['metadata'] {
  if (v === true) return true;
  const hashes = obj(v ?? null);
  if (!hashes) return false;
  const sha = lowerHex(stringMap(hashes));
  return sha ? { sha256: sha } : true;
}

function provenanceUrl(value: string, pageUrl: string): string | null {
  const abs = absolute(value, pageUrl);
  return abs ? urlWithoutCredentials(abs.url) : null;
}

function parseJsonPage(text: string, pageUrl: string): UpstreamPage {
  const doc = obj(JSON.parse(text) as Json);
  if (!doc) throw new Error('the upstream project page is not a JSON object');
  const files: UpstreamFile[] = [];
  const list = Array.isArray(doc.files) ? doc.files : [];
  for (const raw of list) {
    const f = obj(raw);
    const filename = str(f?.filename);
    const href = str(f?.url);
    if (!f || filename === null || href === null || !safeFilename(filename)) continue;
    const abs = absolute(href, pageUrl);
    if (!abs) continue;
    const hashes = stringMap(f.hashes);
    const yanked = f.yanked;
    const file: UpstreamFile = {
      filename,
      url: abs.url,
      sha256: lowerHex(hashes),
      hashes,
      requiresPython: str(f['requires-python']),
      yanked: typeof yanked === 'string' ? yanked : yanked === true ? '' : false,
      // PEP 714: `core-metadata` wins; `dist-info-metadata` (and the 1.0 `data-` spelling) are older.
      metadata: jsonMetadata(f['core-metadata'] ?? f['dist-info-metadata'] ?? f['data-dist-info-metadata']),
      size: typeof f.size === 'number' && Number.isSafeInteger(f.size) && f.size >= 0 ? f.size : null,
      uploadTime: str(f['upload-time']),
    };
    if (typeof f['gpg-sig'] === 'boolean') file.gpgSig = f['gpg-sig'];
    if ('provenance' in f) {
      const p = str(f.provenance);
      file.provenance = p === null ? null : provenanceUrl(p, pageUrl);
    }
    files.push(file);
  }
  const versions = Array.isArray(doc.versions) ? doc.versions.filter((v): v is string => typeof v === 'string') : null;
  const st = obj(doc['project-status']);
  const status = str(st?.status);
  const reason = str(st?.reason);
  return {
    name: str(doc.name),
    files,
    versions,
    ...(status ? { status: { status, ...(reason ? { reason } : {}) } } : {}),
  };
}
