/**
 * What every member of an index answers, hosted or cached alike: the contract a virtual index
 * reads its members through (`virtual/members.ts`), as the hosted and cached repositories
 * implement it (`hosted/repos.ts`, `cached/repos.ts`).
 */
import type { IndexConfig } from '../../config/types.js';
import type { Descriptor, ManifestRecord } from '../model/meta.js';
import type { Reference } from '../model/names.js';
import type { ReadOptions } from '../../storage/types.js';

/** A manifest a member can serve: its record exists and the member holds its bytes. */
export interface FoundManifest {
  hex: string;
  record: ManifestRecord;
  /** The member index that recorded it: its holds on the bytes decide whether they are served (`seenIn`). */
  index: IndexConfig;
  /** Found by a cached member's tag: until when the upstream's last answer about the tag holds (ms since the epoch). */
  confirmedUntil?: number;
  /** Found by a cached member's tag its upstream no longer has: since when it is kept (ms since the epoch). */
  keptSince?: number;
}

export interface MemberReader {
  readonly index: IndexConfig;
  /** `opts.recent`: a request's read, which `[storage] read_cache_ms` may answer from memory. */
  resolve(repo: readonly string[], ref: Reference, opts?: ReadOptions): Promise<FoundManifest | null>;
  tags(repo: readonly string[]): Promise<Record<string, string>>;
  referrers(repo: readonly string[], subjectHex: string): Promise<Descriptor[]>;
  /** The repository paths this member holds (under its own route). */
  repositories(): Promise<string[][]>;
}
