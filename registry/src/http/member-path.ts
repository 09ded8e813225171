/**
 * The one safety check on archive member paths, for every reader of archives: an ecosystem's
 * upload validation and the archive browser (`archive/`). A name that could escape an
 * extraction directory is refused, whoever reads it.
 */

/**
 * Why `name` is unsafe as an archive member path, or null when it is safe. Refused: empty names,
 * control characters, backslashes (a separator on Windows), absolute paths (including Windows
 * drive forms) and `..` segments.
 */
export function unsafeMemberReason(name: string): string | null {
  if (name === '') return 'empty name';
  if (hasControlChar(name)) return 'control character in the name';
  if (name.includes('\\')) return 'backslash in the name';
  if (name.startsWith('/')) return 'absolute path';
  if (/^[A-Za-z]:/.test(name)) return 'absolute path (drive letter)';
  if (name.split('/').includes('..')) return 'parent-directory ("..") segment';
  return null;
}

/** The path's segments without empty and `.` segments. */
export function segmentsOf(name: string): string[] {
  return name.split('/').filter((s) => s !== '' && s !== '.');
}

/** True when `text` has an ASCII control character (C0 or DEL). */
export function hasControlChar(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}
