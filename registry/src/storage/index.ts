/** Opens the configured storage backend. */
import type { StorageConfig } from '../config/types.js';
import { FsBlobStore } from './fs/blob-store.js';
import { FsMetaStore } from './fs/meta-store.js';
import { BlobHolds } from './holds.js';
import type { BlobStore, MetaStore } from './types.js';

export interface Stores {
  blobs: BlobStore;
  meta: MetaStore;
  /** Who holds which blob: the only way bytes are deleted from the shared store. */
  holds: BlobHolds;
}

export async function openStores(cfg: StorageConfig): Promise<Stores> {
  if (cfg.backend === 's3') {
    throw new Error('storage.backend = "s3" is not available in this build yet; use "fs"');
  }
  const blobs = new FsBlobStore(cfg.path);
  const meta = new FsMetaStore(cfg.path);
  await blobs.init();
  await meta.init();
  return { blobs, meta, holds: new BlobHolds(meta, blobs) };
}
