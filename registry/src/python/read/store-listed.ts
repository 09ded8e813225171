/**
 * Makes sure a listed file's bytes are in the blob store, for readers that need random access to
 * them (archive inspection). A stored file is left alone; a cached one not yet stored is fetched
 * once through its index's single-flight (joining a download already under way), verified and
 * stored, and this resolves once it is; otherwise it fails with an `UpstreamError` (`broken`).
 */
import { finished } from 'node:stream/promises';
import { UpstreamError } from '../../roles/upstream-error.js';
import type { ListedFile } from './source/types.js';

export async function storeListedFile(listed: ListedFile): Promise<void> {
  const body = await listed.open('file');
  if (!body || body.kind === 'blob') return;
  const what = listed.file.filename;
  try {
    await finished(body.stream.resume());
  } catch {
    throw new UpstreamError('broken', null, `could not fetch ${what} from the upstream; it was not stored`);
  }
  if (body.stored && !(await body.stored)) throw new UpstreamError('broken', null, `${what} from the upstream could not be verified and stored`);
}
