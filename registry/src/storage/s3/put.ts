/**
 * The s3 backend's uploads of bytes in memory or in a local file (streamed from it,
 * `requests.ts`), each checked by the store against a checksum sent with it, so the store refuses
 * (and keeps nothing of) a body that changed on the way, and this process hashes each byte only
 * as much as it must:
 *
 * - `putVerified`: one PUT of a whole object whose sha256 the caller already computed (a stage
 *   hashes every byte on its way in). Over http that digest is the signed payload hash
 *   (`x-amz-content-sha256`), over https the request signs `UNSIGNED-PAYLOAD`; either way it also
 *   goes as `x-amz-checksum-sha256`, which the store checks too. No second sha256 and no MD5 here.
 * - `uploadPartChecked` (a part of a multipart upload) and `putChecked` (an object whose digest
 *   is not known yet): signed `UNSIGNED-PAYLOAD` and checked by their CRC32
 *   (`x-amz-checksum-crc32`; zlib's, far cheaper than a sha256), which the caller computed while
 *   the bytes were written (`part-checksums.ts`). A blob's own sha256 was verified on the local
 *   copy before its upload is completed.
 *
 * All three go the lean way (`requests.ts`), each one request on the location's agent.
 *
 * A PUT is atomic: a refused body leaves the key as it was (absent, for a blob key).
 */
import type { IncomingMessage } from 'node:http';
import type { Sha256Hex } from '../types.js';
import type { S3Location } from './connect.js';
import type { FileSlice } from './requests.js';

/** PUTs `body` at `key`; the store refuses it unless its sha256 is `sha256`. */
export async function putVerified(loc: S3Location, key: string, body: Buffer | FileSlice, sha256: Sha256Hex): Promise<void> {
  const headers = { 'x-amz-checksum-sha256': Buffer.from(sha256, 'hex').toString('base64') };
  drain(await loc.requests.request('PUT', key, headers, [200], { bytes: body, sha256 }));
}

/**
 * PUTs `body` at `key` checked by its CRC32 (`crc`) only: for bytes whose digest is not known yet
 * (a shared stage's chunk, verified when the blob is assembled).
 */
export async function putChecked(loc: S3Location, key: string, body: Buffer | FileSlice, crc: number): Promise<void> {
  await putCrc32(loc, key, '', body, crc);
}

/** Uploads `body` (CRC32 `crc`) as part `part` of the multipart upload `uploadId` to `key`; returns its ETag. */
export async function uploadPartChecked(loc: S3Location, key: string, uploadId: string, part: number, body: Buffer | FileSlice, crc: number): Promise<string> {
  const res = await putCrc32(loc, key, `partNumber=${part}&uploadId=${encodeURIComponent(uploadId)}`, body, crc);
  const etag = res.headers.etag;
  if (typeof etag !== 'string' || etag === '') throw new Error(`the store gave no ETag for part ${part} of ${key}`);
  return etag.replace(/^"|"$/g, '');
}

async function putCrc32(loc: S3Location, key: string, query: string, body: Buffer | FileSlice, crc: number): Promise<IncomingMessage> {
  const res = await loc.requests.request('PUT', key, { 'x-amz-checksum-crc32': crc32Base64(crc) }, [200], { bytes: body }, query);
  drain(res);
  return res;
}

/** S3's `x-amz-checksum-crc32`: the big-endian CRC32, in base64. */
function crc32Base64(crc: number): string {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(crc);
  return out.toString('base64');
}

/** A successful upload's answer has nothing to read; its socket goes back to the pool. */
function drain(res: IncomingMessage): void {
  res.resume();
}
