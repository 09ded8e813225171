/**
 * A wheel's `.dist-info/METADATA`, read from any archive source: the stored wheel, or the
 * upstream's copy read by ranges. Only the zip's central directory and that one member are read.
 */
import { ArchiveError, listMembers, readMember, type ArchiveSource } from '../../../archive/index.js';
import { HttpError } from '../../../http/errors.js';

/** Core metadata larger than this is refused (PyPI's largest are a few hundred KB). */
export const MAX_METADATA_BYTES = 16 * 1024 * 1024;

const DIST_INFO_METADATA = /^[^/]+\.dist-info\/METADATA$/;

/** The METADATA bytes; an `ArchiveError` or `HttpError` when they cannot be read. */
export async function readWheelMetadata(source: ArchiveSource, filename: string, tmpDir: string): Promise<Buffer> {
  const opts = { tmpDir, limits: { maxPreviewBytes: MAX_METADATA_BYTES }, maxBytes: MAX_METADATA_BYTES };
  const [name = '', version = ''] = filename.split('-');
  const content = await readMember(source, 'zip', `${name}-${version}.dist-info/METADATA`, opts).catch(async (err: unknown) => {
    if (!(err instanceof ArchiveError && err.kind === 'not-found')) throw err;
    // The .dist-info folder may be spelled differently from the filename: find it.
    const listing = await listMembers(source, 'zip', { tmpDir });
    const found = listing.members.find((m) => m.kind === 'file' && DIST_INFO_METADATA.test(m.path));
    if (!found) throw new HttpError(404, `${filename} has no .dist-info/METADATA`);
    return readMember(source, 'zip', found.path, opts);
  });
  if (content.nextOffset !== null) throw new HttpError(502, `the METADATA of ${filename} is larger than ${MAX_METADATA_BYTES} bytes`);
  return content.data;
}
