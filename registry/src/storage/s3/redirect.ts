/**
 * `[storage] redirect = true`: short-lived presigned GET URLs of blob objects, so that clients
 * that can reach the object store fetch large blobs from it and the registry carries no bytes.
 * A URL is signed locally (no request to the store) with the configured keys; it carries a
 * signature, never the secret key, but anyone holding it can read that one object until it
 * expires, so it is treated as a credential: never logged, counted or shown (`observe/log.ts`
 * scrubs the signature should one reach a log line by some other path).
 */
import type { Client } from 'minio';
import type { RedirectConfig } from '../../config/types.js';
import type { BlobInfo, BlobRedirect, Sha256Hex } from '../types.js';
import { asUnavailable } from './errors.js';

export class S3BlobRedirect implements BlobRedirect {
  constructor(
    /** Signs for the address clients use (`redirect_endpoint`, else the store's own). */
    private readonly client: Client,
    private readonly bucket: string,
    private readonly key: (digest: Sha256Hex) => string,
    private readonly cfg: RedirectConfig,
    /** For messages: the store's endpoint, never a key or URL. */
    private readonly endpoint: string,
  ) {}

  async urlFor(blob: BlobInfo): Promise<string | null> {
    // An empty blob is never worth a round trip, whatever the threshold says.
    if (blob.size === 0 || blob.size < this.cfg.minSize) return null;
    try {
      return await this.client.presignedGetObject(this.bucket, this.key(blob.digest), this.cfg.ttlSecs);
    } catch (err) {
      throw asUnavailable(err, this.endpoint, `presigning ${blob.digest}`);
    }
  }
}
