/**
 * Core metadata (wheel `METADATA`, sdist `PKG-INFO`): RFC 822 style headers, then an optional
 * body (the description). Only the header block is parsed; the bytes themselves are stored as they
 * came, because they are what the `.metadata` sibling serves.
 */
import { isValidVersion, normalizeVersion } from './pep440.js';
import { normalizeName } from './records.js';
import { badArtifact } from './errors.js';

/** Header names lowercased; a header may repeat (`Classifier`, `License-File`, ...). */
export type Headers = Map<string, string[]>;

/** Parses the header block of an email-header document; `what` names it in error messages. */
export function parseHeaders(bytes: Buffer, what: string): Headers {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw badArtifact(`${what} is not valid UTF-8`);
  }
  const headers: Headers = new Map();
  let last: { key: string; values: string[] } | null = null;
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line === '') break; // end of the header block; the body follows
    if (line.startsWith(' ') || line.startsWith('\t')) {
      // A folded continuation of the previous header.
      if (!last) throw badArtifact(`${what} line ${i + 1}: continuation line before any header`);
      const at = last.values.length - 1;
      last.values[at] = `${last.values[at] ?? ''}\n${line.trim()}`;
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) throw badArtifact(`${what} line ${i + 1}: expected "Name: value", got ${JSON.stringify(line.slice(0, 80))}`);
    const key = line.slice(0, colon).trim().toLowerCase();
    const values = headers.get(key) ?? [];
    values.push(line.slice(colon + 1).trim());
    headers.set(key, values);
    last = { key, values };
  }
  return headers;
}

export function first(headers: Headers, key: string): string | undefined {
  return headers.get(key.toLowerCase())?.[0];
}

export interface CoreMetadata {
  /** `Name` as written. */
  name: string;
  project: string;
  /** Normalised PEP 440 version. */
  version: string;
  metadataVersion: { major: number; minor: number };
  requiresPython?: string;
  licenseFiles: string[];
}

const PROJECT_NAME = /^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$/i;

/** Parses and checks core metadata: `Metadata-Version`, a valid `Name` and a PEP 440 `Version`. */
export function parseCoreMetadata(bytes: Buffer, what: string): CoreMetadata {
  const headers = parseHeaders(bytes, what);
  const mv = first(headers, 'Metadata-Version');
  if (mv === undefined) throw badArtifact(`${what} has no Metadata-Version`);
  const mvMatch = /^(\d+)\.(\d+)$/.exec(mv);
  if (!mvMatch) throw badArtifact(`${what}: Metadata-Version ${JSON.stringify(mv)} is not of the form X.Y`);
  const metadataVersion = { major: Number(mvMatch[1]), minor: Number(mvMatch[2]) };
  if (metadataVersion.major < 1 || metadataVersion.major > 2) {
    throw badArtifact(`${what}: Metadata-Version ${mv} is not supported (1.x and 2.x are)`);
  }
  const name = first(headers, 'Name');
  if (!name) throw badArtifact(`${what} has no Name`);
  if (!PROJECT_NAME.test(name)) throw badArtifact(`${what}: Name ${JSON.stringify(name)} is not a valid project name`);
  const rawVersion = first(headers, 'Version');
  if (!rawVersion) throw badArtifact(`${what} has no Version`);
  const version = isValidVersion(rawVersion) ? normalizeVersion(rawVersion) : null;
  if (version === null) throw badArtifact(`${what}: Version ${JSON.stringify(rawVersion)} is not a PEP 440 version`);
  const requiresPython = first(headers, 'Requires-Python');
  return {
    name,
    project: normalizeName(name),
    version,
    metadataVersion,
    ...(requiresPython ? { requiresPython } : {}),
    licenseFiles: headers.get('license-file') ?? [],
  };
}

/** True from Metadata-Version 2.4 on, where `License-File` entries must exist in the archive. */
export function requiresLicenseFiles(meta: CoreMetadata): boolean {
  const { major, minor } = meta.metadataVersion;
  return major > 2 || (major === 2 && minor >= 4);
}

/** The archive's metadata must describe the file it came in. */
export function checkAgainstFilename(meta: CoreMetadata, name: { filename: string; project: string; version: string }, what: string): void {
  if (meta.project !== name.project) {
    throw badArtifact(`${what} says Name: ${meta.name}, but the filename ${name.filename} is for project ${name.project}`);
  }
  if (meta.version !== name.version) {
    throw badArtifact(`${what} says Version: ${meta.version}, but the filename ${name.filename} has version ${name.version}`);
  }
}
