/** Archive member names that could escape an extraction directory are refused. */

/**
 * Why `name` is unsafe as an archive member path, or null when it is safe. Refused: absolute
 * paths (including Windows drive and UNC forms), `..` segments, backslashes (a separator on
 * Windows), and control characters.
 */
export function unsafeMemberReason(name: string): string | null {
  if (name === '') return 'empty name';
  if (hasControlChar(name)) return 'control character in name';
  if (name.includes('\\')) return 'backslash in name';
  if (name.startsWith('/')) return 'absolute path';
  if (/^[A-Za-z]:/.test(name)) return 'drive-letter path';
  if (name.split('/').includes('..')) return '".." segment';
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
