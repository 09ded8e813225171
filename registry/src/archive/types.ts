/** Shapes shared by the zip and tar walkers and the public API. */
import type { Readable } from 'node:stream';
import type { ArchiveFormat } from './names.js';

export type MemberKind = 'file' | 'directory' | 'symlink' | 'hardlink' | 'other';

export interface MemberInfo {
  /** The member's name without leading `./` or trailing `/`; as stored when `unsafe`. */
  path: string;
  kind: MemberKind;
  /** Uncompressed size in bytes, as the archive declares it. */
  size: number;
  /** Zip only: stored (compressed) size. */
  compressedSize?: number;
  /** Set when the member's name announces an archive that can be opened with `path!/`. */
  nested?: ArchiveFormat;
  /** Links: where they point (tar; zip symlink targets are member bytes and are not read). Never followed. */
  linkTarget?: string;
  /** Zip only: the member is encrypted and cannot be previewed. */
  encrypted?: true;
  /** Why the name is unsafe (traversal, absolute, ...); such a member is listed but never opened. */
  unsafe?: string;
  /** More than one member has this path; none of them can be opened by path. */
  duplicate?: true;
  /** Only when listed with `sniffBytes`: whether the file's first bytes look like text. */
  text?: boolean;
}

export interface WalkEntry {
  info: MemberInfo;
  /**
   * The member's bytes, decompressed, metered against the request budget. At most once per entry,
   * and only during the visit. Destroy the stream when done with it early.
   */
  open(): Promise<Readable>;
}

/** Called for every entry in archive order; resolve false to stop the walk. */
export type Visit = (entry: WalkEntry) => Promise<boolean>;
