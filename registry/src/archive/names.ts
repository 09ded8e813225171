/** Archive formats by file name, member-path syntax (nesting) and name safety. */
import { unsafeMemberReason } from '../http/member-path.js';
import { ArchiveError } from './errors.js';

export type ArchiveFormat = 'zip' | 'tar' | 'tar.gz';

/**
 * Separates the levels of a nested member path: `dist/inner.tar.gz!/pkg/mod.py` is `pkg/mod.py`
 * inside the member `dist/inner.tar.gz`. The Java `jar:` convention; `!` is legal in URL paths.
 */
export const NESTING_SEPARATOR = '!/';

const FORMATS: [string, ArchiveFormat][] = [
  ['.tar.gz', 'tar.gz'],
  ['.tgz', 'tar.gz'],
  ['.tar', 'tar'],
  ['.zip', 'zip'],
  ['.whl', 'zip'],
  ['.egg', 'zip'],
];
/** Tar compressions we store and serve but do not open. */
const DOWNLOAD_ONLY = ['.tar.bz2', '.tbz', '.tbz2', '.tar.xz', '.txz', '.tar.zst', '.tar.zstd', '.tzst', '.tar.lz', '.tar.lzma', '.tlz', '.tar.z'];

/** The format a file name announces; `download-only` for tars we cannot open; null for non-archives. */
export function formatOf(filename: string): ArchiveFormat | 'download-only' | null {
  const lower = filename.toLowerCase();
  for (const [suffix, format] of FORMATS) if (lower.endsWith(suffix)) return format;
  if (DOWNLOAD_ONLY.some((suffix) => lower.endsWith(suffix))) return 'download-only';
  return null;
}

/** Like `formatOf`, but a name we cannot open is an `unsupported` error that says why. */
export function requireFormat(filename: string): ArchiveFormat {
  const format = formatOf(filename);
  if (format === 'download-only') {
    throw new ArchiveError('unsupported', `${filename} is download-only: inspection reads zip, wheel, egg, .tar, .tar.gz and .tgz archives, not other tar compressions`);
  }
  if (format === null) {
    throw new ArchiveError('unsupported', `${filename} is not an archive that can be inspected (zip, .whl, .egg, .tar, .tar.gz, .tgz)`);
  }
  return format;
}

/**
 * Why a member name must not be trusted as a relative path, or null when it is fine: the shared
 * member-path check, plus the nesting separator (a member so named could not be addressed).
 */
export function unsafeReason(name: string): string | null {
  const unsafe = unsafeMemberReason(name);
  if (unsafe) return unsafe;
  if (name.includes(NESTING_SEPARATOR)) return `contains the nesting separator "${NESTING_SEPARATOR}"`;
  return null;
}

/** The name members are listed and matched under: without leading `./` and trailing `/`. */
export function memberPath(rawName: string): string {
  let name = rawName;
  while (name.startsWith('./')) name = name.slice(2);
  while (name.endsWith('/') && name.length > 1) name = name.slice(0, -1);
  return name;
}

/**
 * Splits a requested member path into its levels. Every level must be a safe relative path
 * (requests are refused with `unsafe` before any archive byte is read).
 */
export function splitMemberPath(path: string): string[] {
  const levels = path.split(NESTING_SEPARATOR).map(memberPath);
  for (const level of levels) {
    const reason = unsafeReason(level);
    if (reason) throw new ArchiveError('unsafe', `member path ${JSON.stringify(path)} is refused: ${reason}`);
    if (level.split('/').some((s) => s === '' || s === '.')) {
      throw new ArchiveError('unsafe', `member path ${JSON.stringify(path)} is refused: empty or "." segment`);
    }
  }
  return levels;
}
