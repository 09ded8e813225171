/**
 * The server-side copy that publishes a staging object under its digest. S3's CopyObject takes
 * objects up to 5 GiB; a larger one is copied as a multipart upload whose parts are
 * UploadPartCopy requests of ranges of the source (1 GiB each, so the 10 000-part limit is far
 * beyond the 5 TiB object limit). The store copies the bytes itself: nothing passes through this
 * process either way. The `minio` client's own `composeObject` is not used: for one source larger
 * than a part it numbers every range part 1 and shares one header object between the ranges, and
 * it swallows a failure (aborts the upload and resolves).
 */
import { CopyDestinationOptions, CopySourceOptions } from 'minio';
import type { S3Location } from './connect.js';

export interface CopyLimits {
  /** Largest object copied with one CopyObject. */
  singleCopyMax: number;
  /** Bytes per UploadPartCopy above that (at least 5 MiB, S3's minimum part). */
  partSize: number;
}

const GiB = 1024 * 1024 * 1024;
export const S3_COPY_LIMITS: CopyLimits = { singleCopyMax: 5 * GiB, partSize: GiB };

/** Copies `from` (of `size` bytes) to `to` in the location's bucket. */
export async function copyObject(loc: S3Location, from: string, to: string, size: number, limits: CopyLimits = S3_COPY_LIMITS): Promise<void> {
  const { client, bucket } = loc;
  if (size <= limits.singleCopyMax) {
    await client.copyObject(new CopySourceOptions({ Bucket: bucket, Object: from }), new CopyDestinationOptions({ Bucket: bucket, Object: to }));
    return;
  }
  const source = new CopySourceOptions({ Bucket: bucket, Object: from }).getHeaders()['x-amz-copy-source'];
  const uploadId = await client.initiateNewMultipartUpload(bucket, to, {});
  try {
    const parts: { part: number; etag: string }[] = [];
    for (let start = 0, part = 1; start < size; start += limits.partSize, part++) {
      const end = Math.min(start + limits.partSize, size) - 1;
      const headers = { 'x-amz-copy-source': source, 'x-amz-copy-source-range': `bytes=${start}-${end}` };
      const { etag } = await client.uploadPart({ bucketName: bucket, objectName: to, uploadID: uploadId, partNumber: part, headers });
      parts.push({ part, etag });
    }
    await client.completeMultipartUpload(bucket, to, uploadId, parts);
  } catch (err) {
    await client.abortMultipartUpload(bucket, to, uploadId).catch(() => undefined);
    throw err;
  }
}
