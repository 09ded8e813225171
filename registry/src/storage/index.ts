/** Opens the configured storage backend. */
import type { StorageConfig } from '../config/types.js';
import { FsBlobStore } from './fs/blob-store.js';
import { FsMetaStore } from './fs/meta-store.js';
import { BlobHolds } from './holds.js';
import { S3BlobStore } from './s3/blob-store.js';
import { S3ChunkStore } from './s3/chunks.js';
import { SharedStages } from './shared-stages.js';
import { connectS3, type ConnectOptions } from './s3/connect.js';
import { S3MetaStore } from './s3/meta-store.js';
import type { BlobStore, MetaStore } from './types.js';

export interface Stores {
  blobs: BlobStore;
  meta: MetaStore;
  /** Who holds which blob: the only way bytes are deleted from the shared store. */
  holds: BlobHolds;
  /** True when other processes may share the store (s3): state that must be shared lives in it. */
  shared: boolean;
  /**
   * Staged writes kept in the store, which any process sharing it can continue (`shared-stages.ts`);
   * only where the store is shared, null otherwise (a process's own `blobs.stage()` serves there).
   */
  sharedStages: SharedStages | null;
}

export interface OpenOptions {
  /**
   * This process's local scratch folder (the data dir's): where a backend whose staging is
   * remote keeps the local copies of stages. Never part of the store.
   */
  scratchDir: string;
  /** s3: timeouts of the start-up checks and of each request. */
  s3?: ConnectOptions;
}

/**
 * Opens the stores the config names. With s3 the bucket is checked first (reachable, keys
 * accepted, bucket present, conditional writes honoured): a `ConfigError` stops start-up.
 */
export async function openStores(cfg: StorageConfig, opts: OpenOptions): Promise<Stores> {
  if (cfg.backend === 's3') {
    const loc = await connectS3(cfg, opts.s3);
    const blobs = new S3BlobStore(loc, { scratchDir: opts.scratchDir });
    const meta = new S3MetaStore(loc);
    await blobs.init();
    const chunks = new S3ChunkStore(loc, opts.scratchDir, (digest) => blobs.key(digest));
    return { blobs, meta, holds: new BlobHolds(meta, blobs), shared: true, sharedStages: new SharedStages(meta, chunks, blobs) };
  }
  const blobs = new FsBlobStore(cfg.path);
  const meta = new FsMetaStore(cfg.path);
  await blobs.init();
  await meta.init();
  return { blobs, meta, holds: new BlobHolds(meta, blobs), shared: false, sharedStages: null };
}
