/** The one error type of `archive/`: every refusal says what kind it is, for the caller to map. */

export type ArchiveErrorKind =
  /** Format or feature we do not read (download-only tar compressions, encryption, odd methods). */
  | 'unsupported'
  /** The bytes are not a well-formed archive: truncated, bad headers, sizes that do not add up. */
  | 'corrupt'
  /** A bound was hit: bytes, members scanned, nesting depth, compression ratio. */
  | 'too-large'
  /** The time budget of one request ran out. */
  | 'timeout'
  /** No member has that path (or the blob itself is gone). */
  | 'not-found'
  /** The requested path, or the member it names, is unsafe or ambiguous (traversal, links, duplicates). */
  | 'unsafe'
  /** The member exists but has no bytes to show (a directory, a device). */
  | 'not-a-file'
  /** The requested offset lies past the end of the member. */
  | 'range';

export class ArchiveError extends Error {
  constructor(
    readonly kind: ArchiveErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'ArchiveError';
  }
}

/** Anything a parser throws that is not already ours means the archive bytes are bad. */
export function asArchiveError(err: unknown, what: string): ArchiveError {
  if (err instanceof ArchiveError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ArchiveError('corrupt', `${what} is corrupt or truncated: ${message}`);
}
