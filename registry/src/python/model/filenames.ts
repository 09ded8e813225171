/**
 * The two accepted artifact filenames. Wheels follow the binary distribution format (PEP 427/491):
 * `{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`; sdists follow PEP 625:
 * `{normalized_name_with_underscores}-{normalized_version}.tar.gz`.
 */
import { normalizeVersion } from './pep440.js';
import { normalizeName } from './records.js';
import { badArtifact } from './errors.js';
import { hasControlChar } from '../../http/member-path.js';

export const ACCEPTED = 'only wheels (.whl) and source distributions (.tar.gz) are accepted';

interface Common {
  filename: string;
  /** The name as the filename spells it. */
  rawName: string;
  /** PEP 503 normalised project name. */
  project: string;
  /** Normalised PEP 440 version. */
  version: string;
}

export interface WheelName extends Common {
  kind: 'wheel';
  build?: string;
  /** The expanded compressed tag set: every `python-abi-platform` triple. */
  tags: string[];
}

export interface SdistName extends Common {
  kind: 'sdist';
}

export type ArtifactName = WheelName | SdistName;

/** Names as wheel filenames escape them: runs of other characters become `_`. */
const WHEEL_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const TAG = /^[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*$/;
const BUILD = /^[0-9][A-Za-z0-9_.]*$/;

/** Parses an upload's filename, or throws a 400 that says what a valid one looks like. */
export function parseArtifactName(filename: string): ArtifactName {
  if (filename === '' || filename.length > 255 || /[/\\]/.test(filename) || hasControlChar(filename)) {
    throw badArtifact(`invalid filename ${JSON.stringify(filename)}`);
  }
  if (filename.endsWith('.whl')) return parseWheelName(filename);
  if (filename.endsWith('.tar.gz')) return parseSdistName(filename);
  throw badArtifact(`unsupported file type ${JSON.stringify(filename)}: ${ACCEPTED}`);
}

function parseWheelName(filename: string): WheelName {
  const parts = filename.slice(0, -'.whl'.length).split('-');
  const usage = `invalid wheel filename ${JSON.stringify(filename)}: expected {name}-{version}(-{build})?-{python tag}-{abi tag}-{platform tag}.whl`;
  if (parts.length !== 5 && parts.length !== 6) throw badArtifact(usage);
  const [rawName = '', rawVersion = ''] = parts;
  const build = parts.length === 6 ? parts[2] : undefined;
  const [py = '', abi = '', plat = ''] = parts.slice(-3);
  if (!WHEEL_NAME.test(rawName)) throw badArtifact(`${usage} (bad name ${JSON.stringify(rawName)})`);
  const version = normalizeVersion(rawVersion);
  if (version === null) throw badArtifact(`${usage} (${JSON.stringify(rawVersion)} is not a PEP 440 version)`);
  if (build !== undefined && !BUILD.test(build)) {
    throw badArtifact(`${usage} (the build tag ${JSON.stringify(build)} must start with a digit)`);
  }
  for (const tag of [py, abi, plat]) {
    if (!TAG.test(tag)) throw badArtifact(`${usage} (bad tag ${JSON.stringify(tag)})`);
  }
  const tags: string[] = [];
  for (const p of py.split('.')) for (const a of abi.split('.')) for (const t of plat.split('.')) tags.push(`${p}-${a}-${t}`);
  return { kind: 'wheel', filename, rawName, project: normalizeName(rawName), version, ...(build !== undefined ? { build } : {}), tags };
}

function parseSdistName(filename: string): SdistName {
  const stem = filename.slice(0, -'.tar.gz'.length);
  const parts = stem.split('-');
  const usage = `invalid sdist filename ${JSON.stringify(filename)}: PEP 625 requires {normalized_name}-{normalized_version}.tar.gz with the name lowercase and "-", "_", "." runs written as "_" (for example my_project-1.0.tar.gz)`;
  if (parts.length !== 2) throw badArtifact(usage);
  const [rawName = '', rawVersion = ''] = parts;
  const expectedName = normalizeName(rawName).replace(/-/g, '_');
  if (rawName === '' || rawName !== expectedName || !/^[a-z0-9](?:[a-z0-9_]*[a-z0-9])?$/.test(rawName)) {
    throw badArtifact(`${usage} (name ${JSON.stringify(rawName)} should be ${JSON.stringify(expectedName)})`);
  }
  const version = normalizeVersion(rawVersion);
  if (version === null) throw badArtifact(`${usage} (${JSON.stringify(rawVersion)} is not a PEP 440 version)`);
  if (version !== rawVersion) throw badArtifact(`${usage} (version ${JSON.stringify(rawVersion)} should be written ${JSON.stringify(version)})`);
  return { kind: 'sdist', filename, rawName, project: normalizeName(rawName), version };
}

/** The filetype form field that each kind must carry. */
export const FILETYPE: Record<ArtifactName['kind'], string> = { wheel: 'bdist_wheel', sdist: 'sdist' };
