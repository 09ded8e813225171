/** Opens the configured storage backend. */
import type { StorageConfig } from '../config/types.js';
import { FsBlobStore } from './fs/blob-store.js';
import { FsChunkStore } from './fs/chunk-store.js';
import { FsMetaStore } from './fs/meta-store.js';
import type { KeyLocks } from './key-locks.js';
import { BlobHolds } from './holds.js';
import { S3BlobStore } from './s3/blob-store.js';
import { S3ChunkStore } from './s3/chunks.js';
import { RecentReads } from './recent-reads.js';
import { PeerCache } from './peers/peer-cache.js';
import { SharedStages } from './shared-stages.js';
import { ScratchBudget } from './scratch-budget.js';
import { connectS3, presigningClient, type ConnectOptions } from './s3/connect.js';
import { S3BlobRedirect } from './s3/redirect.js';
import { S3MetaStore } from './s3/meta-store.js';
import type { BlobRedirect, BlobStore, MetaStore } from './types.js';

export interface Stores {
  blobs: BlobStore;
  meta: MetaStore;
  /** Who holds which blob: the only way bytes are deleted from the shared store. */
  holds: BlobHolds;
  /**
   * True when other processes may share the store (s3, or fs under several workers): state that
   * must be shared lives in it.
   */
  shared: boolean;
  /**
   * Staged writes kept in the store, which any process sharing it can continue (`shared-stages.ts`);
   * only where the store is shared, null otherwise (a process's own `blobs.stage()` serves there).
   */
  sharedStages: SharedStages | null;
  /**
   * Where clients may fetch large stored blobs themselves (s3 with `redirect = true`); null: every
   * byte goes through this process. Routes use it for full GETs of stored bytes only.
   */
  redirect: BlobRedirect | null;
  /** What this process's staged writes hold of its share of `[storage] scratch_limit` (`scratch-budget.ts`). */
  scratch: ScratchBudget;
  /** `[storage] peer_cache` (storage/peers/): this process's copies, membership and listener; null when off. */
  peers: PeerCache | null;
  /** Leaves what the stores joined (the peer cache's members). */
  close(): Promise<void>;
  /**
   * Removes staged writes older than the stale-staging age: what a process killed mid-write
   * left (s3: staging objects and unfinished multipart uploads in the bucket; fs: files in the
   * staging folder). Live stages are younger and stay. Returns how many went. `sweeper.ts` runs
   * it at start-up and then every hour. (Shared stages have their own sweep, by idle time.)
   */
  sweep(): Promise<number>;
}

export interface OpenOptions {
  /**
   * This process's local scratch folder (the data dir's): where a backend whose staging is
   * remote keeps the local copies of stages. Never part of the store.
   */
  scratchDir: string;
  /** s3: timeouts of the start-up checks and of each request. */
  s3?: ConnectOptions;
  /** Age above which `sweep` removes a staged write; a day by default (`STALE_STAGING_MS`). */
  staleStagingMs?: number;
  /**
   * fs: the other worker processes of this server share the data dir, and these locks with it
   * (`workers/`). The store is then `shared`: its compare-and-swap holds across them, and upload
   * sessions, webhook claims and the token key live in it, as with s3.
   */
  workerLocks?: KeyLocks;
  /**
   * How many processes share `[storage] scratch_limit` (the server's worker processes, on one
   * disk): each takes an equal share of it, so the limit holds for all of them together.
   */
  scratchShares?: number;
  /**
   * With `[storage] peer_cache`: `serve` (a server process) listens for invalidations and joins
   * the members; `write`, the default (a command such as `velodex gc`), only sends them.
   */
  peerRole?: 'serve' | 'write';
  /** Failures of the peer cache's background reads (the next one tries again). */
  onPeerError?: (err: unknown) => void;
}

/**
 * A day: far above the longest live stage (an idle upload session expires after an hour, a
 * commit takes seconds), so a sweep by any process never touches another's live work.
 */
export const STALE_STAGING_MS = 24 * 60 * 60 * 1000;

/** The MetaStore with `[storage] read_cache_ms` applied to the reads that allow it. */
function withRecentReads(meta: MetaStore, cfg: StorageConfig): MetaStore {
  return cfg.readCacheMs ? new RecentReads(meta, cfg.readCacheMs) : meta;
}

/**
 * This process's scratch budget (`scratch-budget.ts`): its share of `[storage] scratch_limit`,
 * or no limit. A share rounds down, so the shares never add up to more than the limit.
 */
export function scratchBudgetOf(cfg: StorageConfig, shares = 1): ScratchBudget {
  const waitMs = cfg.scratchWaitSecs === undefined ? undefined : cfg.scratchWaitSecs * 1000;
  const total = cfg.scratchLimitBytes;
  const processes = Math.max(1, shares);
  const limit = total === undefined ? {} : { limitBytes: Math.max(1, Math.floor(total / processes)), share: { totalBytes: total, processes } };
  return new ScratchBudget({ ...limit, ...(waitMs === undefined ? {} : { waitMs }) });
}

/**
 * Opens the stores the config names. With s3 the bucket is checked first (reachable, keys
 * accepted, bucket present, conditional writes honoured): a `ConfigError` stops start-up.
 */
export async function openStores(cfg: StorageConfig, opts: OpenOptions): Promise<Stores> {
  const staleMs = opts.staleStagingMs ?? STALE_STAGING_MS;
  const scratch = scratchBudgetOf(cfg, opts.scratchShares);
  if (cfg.backend === 's3') {
    const loc = await connectS3(cfg, opts.s3);
    const blobs = new S3BlobStore(loc, { scratchDir: opts.scratchDir, staleScratchMs: staleMs, scratch });
    const store = new S3MetaStore(loc);
    const peers = cfg.peerCache
      ? await PeerCache.open(store, {
          host: opts.peerRole === 'serve' ? cfg.peerCache.host : null,
          ...(opts.onPeerError ? { onError: opts.onPeerError } : {}),
          onRemoved: (url) =>
            opts.onPeerError?.(new Error(`another process could not reach this one's listener at ${url} and removed it from the members (it joined again): check that the processes reach each other at [storage] peer_host`)),
        })
      : null;
    const meta = peers ?? withRecentReads(store, cfg);
    await blobs.init();
    const chunks = new S3ChunkStore(loc, opts.scratchDir, (digest) => blobs.key(digest));
    const sharedStages = new SharedStages(meta, chunks, blobs, { scratch });
    const redirect = cfg.redirect
      ? new S3BlobRedirect(cfg.redirect.endpoint ? presigningClient(cfg, cfg.redirect.endpoint) : loc.client, loc.bucket, (d) => blobs.key(d), cfg.redirect, loc.endpoint)
      : null;
    return {
      blobs,
      meta,
      holds: new BlobHolds(meta, blobs),
      shared: true,
      sharedStages,
      redirect,
      scratch,
      peers,
      close: async () => {
        await peers?.close();
      },
      sweep: () => blobs.sweepStaging(staleMs),
    };
  }
  const blobs = new FsBlobStore(cfg.path, { staleStageMs: staleMs, scratch });
  const fsMeta = new FsMetaStore(cfg.path, opts.workerLocks);
  await blobs.init();
  await fsMeta.init();
  const meta = withRecentReads(fsMeta, cfg);
  const sharedStages = opts.workerLocks ? new SharedStages(meta, new FsChunkStore(cfg.path, (path, digest) => blobs.adopt(path, digest)), blobs, { scratch }) : null;
  return { blobs, meta, holds: new BlobHolds(meta, blobs), shared: sharedStages !== null, sharedStages, redirect: null, scratch, peers: null, close: async () => undefined, sweep: () => blobs.sweepStale() };
}
