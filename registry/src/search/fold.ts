/**
 * How names and words are compared, for every ecosystem alike: lowercase, and runs of `-`, `_`
 * and `.` folded to one `-`. For a Python name this is exactly PEP 503 normalisation; an OCI
 * repository name is lowercase already, so only its separators fold (`my_app` finds `my-app`).
 */
export function foldName(name: string): string {
  return name.replace(/[-_.]+/g, '-').toLowerCase();
}

const WORD = /[\p{L}\p{N}]+/gu;

/** The words of a text, lowercase: letters and digits, every other character separates. */
export function wordsOf(text: string): string[] {
  return text.toLowerCase().match(WORD) ?? [];
}

/** The words of a name (`python-dateutil` -> python, dateutil; `team/api-server` -> team, api, server). */
export function nameWords(name: string): string[] {
  return wordsOf(name);
}
