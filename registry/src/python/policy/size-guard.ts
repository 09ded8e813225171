/**
 * `max-file-size` for a listed file whose size its page does not give (a cached PEP 503 HTML
 * upstream): it is judged once its real size is known, before any byte leaves the server. That
 * is the stored blob's size, or the length the upstream announces when the file is fetched; the
 * fetch is then refused before its body is read, so an oversized file is neither served nor
 * stored. An upstream that announces no length cannot be judged until the file is stored.
 */
import type { IndexConfig } from '../../config/types.js';
import { HttpError } from '../../http/errors.js';
import { UpstreamFileTooLargeError, type FileBody, type FilePart, type ListedFile } from '../sources/types.js';
import { assertFileServable, resolvedFacts } from './apply.js';
import { readPolicy } from './effective.js';

export function guardFileSize(index: IndexConfig, listed: ListedFile): ListedFile {
  const maxSize = readPolicy(index).maxFileSize;
  if (maxSize === undefined || listed.file.size !== null) return listed;
  const judge = (size: number) => assertFileServable(index, listed.project, { ...resolvedFacts(listed.file), size });
  return {
    ...listed,
    async open(part: FilePart): Promise<FileBody | null> {
      let body: FileBody | null;
      try {
        body = await listed.open(part, { maxSize });
      } catch (err) {
        if (!(err instanceof UpstreamFileTooLargeError)) throw err;
        judge(err.size);
        // A shared fetch started by a route with a smaller limit: ours would allow the file.
        throw new HttpError(502, `the fetch of ${listed.file.filename} was refused for another index's max-file-size; retry`);
      }
      // The artifact's own size; a metadata sibling is judged by its file's size once that is known.
      if (part === 'file' && body?.size !== undefined) {
        try {
          judge(body.size);
        } catch (err) {
          if (body.kind === 'stream') body.stream.destroy();
          throw err;
        }
      }
      return body;
    },
  };
}
