/**
 * A wheel's METADATA read from the upstream by HTTP ranges, without downloading the wheel: the
 * zip's end record and central directory, then the member's local header and data. Used when the
 * upstream has no `.metadata` sibling and the wheel is not stored yet. Any surprise (no range
 * support, a short or odd answer, metadata that does not parse or names another project) is
 * null, and the caller reads the whole wheel instead; only our own slot cap's 429 is thrown.
 */
import { openRanged, isSlotDenial } from '../../../roles/upstream-range.js';
import type { UpstreamClient } from '../../../roles/upstream.js';
import { normalizeName } from '../../model/records.js';
import { parseCoreMetadata } from '../../model/core-metadata.js';
import type { ResolvedFile } from '../../model/resolved.js';
import { MAX_METADATA_BYTES, readWheelMetadata } from './wheel-metadata.js';

/**
 * Wheels smaller than this are read whole (and stored): the range reads of the zip's tail would
 * fetch about as much, and the client usually downloads the wheel next anyway.
 */
export const RANGED_MIN_SIZE = 256 * 1024;

/** What all range reads for one wheel may fetch: the metadata plus a generous central directory. */
export const RANGED_READ_BUDGET = MAX_METADATA_BYTES + 8 * 1024 * 1024;

export interface RangedMetadataOptions {
  client: UpstreamClient;
  /** The wheel's upstream URL. */
  url: string;
  file: ResolvedFile;
  tmpDir: string;
}

export type RangedMetadata = { kind: 'ok'; bytes: Buffer } | { kind: 'no-ranges' } | { kind: 'small' } | { kind: 'failed'; reason: string };

export async function metadataByRanges({ client, url, file, tmpDir }: RangedMetadataOptions): Promise<RangedMetadata> {
  if (file.size !== null && file.size < RANGED_MIN_SIZE) return { kind: 'small' };
  try {
    const source = await openRanged(client, url, { budget: RANGED_READ_BUDGET, ...(file.size !== null ? { expectedSize: file.size } : {}) });
    if (!source) return { kind: 'no-ranges' };
    if (source.size < RANGED_MIN_SIZE) return { kind: 'small' };
    const bytes = await readWheelMetadata(source, file.filename, tmpDir);
    // Unverified bytes (the wheel's digest cannot be checked from a few ranges): at least they
    // must be core metadata of this very project.
    const meta = parseCoreMetadata(bytes, `the METADATA of ${file.filename}`);
    if (meta.project !== normalizeName(file.filename.split('-')[0] ?? '')) return { kind: 'failed', reason: `METADATA names ${meta.name}` };
    return { kind: 'ok', bytes };
  } catch (err) {
    if (isSlotDenial(err)) throw err;
    return { kind: 'failed', reason: err instanceof Error ? err.message : String(err) };
  }
}
