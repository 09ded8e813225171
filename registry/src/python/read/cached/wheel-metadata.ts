/**
 * A wheel's `.dist-info/METADATA`, read from any archive source: the stored wheel, or the
 * upstream's copy read by ranges. Only the zip's central directory and that one member are read.
 */
import { ArchiveError, listMembers, readMember, type ArchiveSource } from '../../../archive/index.js';
import { NotFoundError } from '../../../roles/errors.js';
import { UpstreamError } from '../../../roles/upstream-error.js';

/** Core metadata larger than this is refused (PyPI's largest are a few hundred KB). */
export const MAX_METADATA_BYTES = 16 * 1024 * 1024;

const DIST_INFO_METADATA = /^[^/]+\.dist-info\/METADATA$/;

/**
 * The METADATA bytes; an `ArchiveError` when the archive cannot be read, a `NotFoundError` when
 * it has no METADATA, an `UpstreamError` (`too_large`) when that is over the bound.
 */
export async function readWheelMetadata(source: ArchiveSource, filename: string, tmpDir: string): Promise<Buffer> {
  const opts = { tmpDir, limits: { maxPreviewBytes: MAX_METADATA_BYTES }, maxBytes: MAX_METADATA_BYTES };
  const [name = '', version = ''] = filename.split('-');
  const content = await readMember(source, 'zip', `${name}-${version}.dist-info/METADATA`, opts).catch(async (err: unknown) => {
    if (!(err instanceof ArchiveError && err.kind === 'not-found')) throw err;
    // The .dist-info folder may be spelled differently from the filename: find it.
    const listing = await listMembers(source, 'zip', { tmpDir });
    const found = listing.members.find((m) => m.kind === 'file' && DIST_INFO_METADATA.test(m.path));
    if (!found) throw new NotFoundError(`${filename} has no .dist-info/METADATA`);
    return readMember(source, 'zip', found.path, opts);
  });
  // Every wheel read here came from an upstream (a cached index's): its bound is the upstream's to keep.
  if (content.nextOffset !== null) throw new UpstreamError('too_large', null, `the METADATA of ${filename} is larger than ${MAX_METADATA_BYTES} bytes`);
  return content.data;
}
