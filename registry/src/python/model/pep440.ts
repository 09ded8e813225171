/**
 * PEP 440 versions: the thin layer over `@renovatebot/pep440` that the rest of the Python code
 * uses, so the library can be swapped in one place.
 */
import pep440 from '@renovatebot/pep440';

/** True when `version` is a valid PEP 440 version (any accepted spelling). */
export function isValidVersion(version: string): boolean {
  return pep440.explain(version) !== null;
}

/**
 * The normalized form of a version (`1.0-RC1` → `1.0rc1`, `1.0-1` → `1.0.post1`), or null when
 * it is not PEP 440. Built from the parsed parts because the library's own `clean()` joins
 * local segments with commas.
 */
export function normalizeVersion(version: string): string | null {
  const parts = pep440.explain(version);
  if (!parts) return null;
  return parts.local ? `${parts.public}+${parts.local}` : parts.public;
}

/**
 * PEP 440 ordering; versions that do not parse sort before every valid one, among themselves by
 * plain string order, so a stray legacy version never breaks a listing.
 */
export function compareVersions(a: string, b: string): number {
  const va = isValidVersion(a);
  const vb = isValidVersion(b);
  if (va && vb) return pep440.compare(a, b);
  if (va !== vb) return va ? 1 : -1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** True for pre-releases and dev releases (what installers skip unless asked). */
export function isPrerelease(version: string): boolean {
  return pep440.explain(version)?.is_prerelease ?? false;
}
