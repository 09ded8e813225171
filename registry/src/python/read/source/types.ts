/**
 * "The project source of an index": what every read handler (Simple pages, legacy JSON, file
 * downloads, inspection) asks, whatever the index's role. Hosted indexes answer from their
 * records, cached ones from their upstream through the document cache, virtual ones by merging
 * their members. Handlers never branch on the role.
 */
import type { Readable } from 'node:stream';
import type { IndexConfig } from '../../../config/types.js';
import type { ResolvedFile, ResolvedProject } from '../../model/resolved.js';

export interface ProjectView {
  /** Changes whenever the resolved project would: the rendered-page cache tag. */
  version: string;
  /** The project comes from (or, merged, includes) a hosted index: it shadows upstream members. */
  hosted: boolean;
  resolve(): Promise<ResolvedProject>;
}

export interface NameList {
  /** Normalized or display names, as the source knows them; de-duplicated by the caller. */
  names: string[];
  /** Changes whenever `names` would. */
  version: string;
}

/**
 * Which bytes of a listed file: the artifact, its PEP 658 `.metadata` sibling, or the detached
 * GPG signature (`.asc`) an upstream says it has (`gpg-sig`).
 */
export type FilePart = 'file' | 'metadata' | 'signature';

export type FileBody =
  /**
   * Stored: served from the blob store, ranges and all. `unconfirmed`: the size comes from the
   * index's own record and the store was not asked whether the bytes are there; the answer finds
   * out as it opens them (one store round trip fewer on a download).
   */
  | { kind: 'blob'; digest: string; size: number; unconfirmed?: true }
  /** Arriving from an upstream right now; errors rather than end short. */
  | {
      kind: 'stream';
      digest: string;
      stream: Readable;
      size: number | undefined;
      /** Settles once the transfer is decided: true when the bytes verified and are stored. */
      stored?: Promise<boolean>;
    };

export interface OpenOptions {
  /**
   * `max-file-size` of the route asking, for a file whose size is not known yet: an upstream
   * fetch whose announced length is over it is refused before any byte is read.
   */
  maxSize?: number;
}

/** An upstream fetch refused by `OpenOptions.maxSize`: the upstream announced `size` bytes. */
export class UpstreamFileTooLargeError extends Error {
  constructor(
    readonly filename: string,
    readonly size: number,
  ) {
    super(`the upstream announced ${size} bytes for ${filename}`);
    this.name = 'UpstreamFileTooLargeError';
  }
}

/** A file an index lists, with the way to its bytes (through whichever member lists it). */
export interface ListedFile {
  /** Normalized name of the project that lists it. */
  project: string;
  file: ResolvedFile;
  /** Null when the part does not exist (no metadata sibling) or its bytes are gone. */
  open(part: FilePart, opts?: OpenOptions): Promise<FileBody | null>;
}

/** Store reads a source started ahead of its `project` call (`IndexSource.startReads`); opaque to callers. */
export interface StartedReads {
  readonly normalized: string;
}

export interface IndexSource {
  /**
   * Null when the index has no such project. `started`: what `startReads` of this source returned
   * for the same project in the same request, used instead of reading again.
   */
  project(normalized: string, started?: StartedReads): Promise<ProjectView | null>;
  /**
   * Starts the store reads `project` will make, without asking any upstream, so a caller that may
   * ask this source after another (a virtual route's upstream members, after its private ones)
   * need not wait for them then. Reads started and never used cost the store calls, nothing else.
   */
  startReads?(normalized: string): StartedReads;
  names(): Promise<NameList>;
  /** The file this index lists under `filename` with exactly these bytes, else null. */
  locate(sha256: string, filename: string): Promise<ListedFile | null>;
}

/** The source of an index, by index name (every Python index has one). */
export type SourceLookup = (indexName: string) => IndexSource | undefined;

/** The cached files a route serves for a project, so mutations can override them. */
export interface CachedLayer {
  /**
   * The cached files of `normalized` as route `index` serves them before overrides (hidden ones
   * included, shadowed ones not), or null when no cached member has the project.
   */
  files(index: IndexConfig, normalized: string): Promise<ResolvedFile[] | null>;
}
