/** The grammar of `/v2/` names: repository names, tags, digests and manifest references. */
import { OciError } from './errors.js';

const NAME_COMPONENT = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$/;
const TAG = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;
const SHA256_DIGEST = /^sha256:([a-f0-9]{64})$/;
export const MAX_NAME_LENGTH = 255;

/** Checks the repository-name grammar of the whole `<name>` (route included). */
export function checkName(segments: readonly string[]): void {
  const full = segments.join('/');
  if (full.length > MAX_NAME_LENGTH) {
    throw new OciError('NAME_INVALID', `repository name is ${full.length} characters long; at most ${MAX_NAME_LENGTH} are allowed`);
  }
  for (const seg of segments) {
    if (!NAME_COMPONENT.test(seg)) {
      throw new OciError('NAME_INVALID', `invalid repository name component "${seg}": use lowercase letters and digits, separated by ".", "_", "__" or "-"`);
    }
  }
}

/** Returns the hex of a `sha256:<hex>` digest; anything else is DIGEST_INVALID. */
export function parseDigest(value: string): string {
  const m = SHA256_DIGEST.exec(value);
  if (m?.[1]) return m[1];
  const algorithm = value.includes(':') ? value.slice(0, value.indexOf(':')) : '';
  if (algorithm && algorithm !== 'sha256') {
    throw new OciError('DIGEST_INVALID', `digest algorithm "${algorithm}" is not supported: only sha256 is`);
  }
  throw new OciError('DIGEST_INVALID', `"${value}" is not a valid digest: expected sha256:<64 lowercase hex characters>`);
}

export type Reference = { kind: 'tag'; tag: string } | { kind: 'digest'; hex: string };

/** A manifest reference: a digest when it has a colon, otherwise a tag. */
export function parseReference(value: string): Reference {
  if (value.includes(':')) return { kind: 'digest', hex: parseDigest(value) };
  if (!TAG.test(value)) {
    throw new OciError('TAG_INVALID', `invalid tag "${value}": use [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`);
  }
  return { kind: 'tag', tag: value };
}

export function isValidTag(value: string): boolean {
  return TAG.test(value);
}
