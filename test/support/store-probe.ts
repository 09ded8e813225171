/**
 * What a running server's store holds, asked through the store's public interface: the suites
 * check "is this digest stored", "which keys are under this prefix", "what does this document
 * say" here instead of reading the backend's files, so they run unchanged on any backend. The
 * probe opens the store the server's own config names (`openStores(config.storage)`) and only
 * reads. What no store interface answers (which blobs exist at all, what is still staged) is
 * asked of the backend in one place, `layout` below.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { buildConfig } from '../../registry/src/config/load.js';
import type { StorageConfig } from '../../registry/src/config/types.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { configFor } from './backend.js';
import { openStores, type Stores } from '../../registry/src/storage/index.js';
import { s3Location } from '../../registry/src/storage/s3/connect.js';
import type { ByteRange, Sha256Hex } from '../../registry/src/storage/types.js';
import type { Readable } from 'node:stream';

export interface StoreProbe {
  /** Is a blob stored under this digest? */
  has(hex: Sha256Hex): Promise<boolean>;
  /** The stored blob's bytes, or null. */
  blob(hex: Sha256Hex, range?: ByteRange): Promise<Readable | null>;
  /** Every metadata key under `prefix` (a folder, no trailing slash), sorted. */
  keys(prefix: string): Promise<string[]>;
  /** A metadata document, or null. */
  doc<T>(key: string): Promise<T | null>;
  /** Digests of every published blob, sorted (for "nothing became visible" checks). */
  blobs(): Promise<Sha256Hex[]>;
  /** Staged bytes the store still keeps (for "nothing left behind" checks); not documents being written. */
  staged(): Promise<string[]>;
}

/**
 * The storage config of the server whose data dir this is: the `[storage]` table of its
 * `velodex.toml`, else the default. Only that table is read: the rest (index secrets from the
 * server's environment, say) is none of the probe's business.
 */
export function storageOf(dataDir: string): StorageConfig {
  const file = join(dataDir, 'velodex.toml');
  // Before the server first starts, its store is the one the run's backend will give it.
  const text = existsSync(file) ? readFileSync(file, 'utf8') : configFor('', dataDir);
  const raw = text ? (parseToml(text) as { storage?: unknown }) : {};
  const only = raw.storage === undefined ? {} : { storage: raw.storage };
  return buildConfig(only, file, { ecosystems, overrides: { dataDir } }).storage;
}

/**
 * The stores themselves, opened as the server with this data dir opens them: for the few tests
 * that change the store behind a server's back (a blob lost, a document from an older version,
 * a store seeded before the server starts). Everything else reads through `storeProbe`.
 */
export function serverStores(dataDir: string): Promise<Stores> {
  return openStores(storageOf(dataDir), { scratchDir: join(dataDir, 'probe-scratch') });
}

/** A probe of the store of the server with this data dir (a `Velodex`'s `dataDir`). */
export async function storeProbe(dataDir: string): Promise<StoreProbe> {
  const storage = storageOf(dataDir);
  const { blobs, meta } = await openStores(storage, { scratchDir: join(dataDir, 'probe-scratch') });
  const backend = layout(storage);
  return {
    has: async (hex) => (await blobs.stat(hex)) !== null,
    blob: (hex, range) => blobs.get(hex, range),
    async keys(prefix) {
      const out: string[] = [];
      for await (const key of meta.list(prefix)) out.push(key);
      return out.sort();
    },
    doc: async <T>(key: string) => (await meta.get<T>(key))?.doc ?? null,
    blobs: backend.blobs,
    staged: backend.staged,
  };
}

/** The two questions only the backend can answer, per backend. */
function layout(storage: StorageConfig): Pick<StoreProbe, 'blobs' | 'staged'> {
  if (storage.backend === 's3') return s3Layout(storage);
  const list = (dir: string) => (existsSync(dir) ? readdirSync(dir, { recursive: true, encoding: 'utf8' }) : []);
  return {
    blobs: async () =>
      list(join(storage.path, 'blobs', 'sha256'))
        .map((p) => p.split('/').pop() ?? '')
        .filter((p) => /^[0-9a-f]{64}$/.test(p))
        .sort(),
    // Not a document's temp file (`meta-*`): one is there while any document is being written (a
    // counter, a summary), for the moment of one write; the checks are about staged bytes.
    staged: async () =>
      list(join(storage.path, 'staging'))
        .filter((name) => !name.startsWith('meta-'))
        .sort(),
  };
}

/** s3: objects under `<prefix>blobs/sha256/`; staging objects and unfinished multipart uploads. */
function s3Layout(storage: StorageConfig): Pick<StoreProbe, 'blobs' | 'staged'> {
  const { client, bucket, prefix } = s3Location(storage);
  const names = async (below: string) => {
    const out: string[] = [];
    for await (const item of client.listObjectsV2(bucket, below, true) as AsyncIterable<{ name?: string }>) if (item.name) out.push(item.name);
    return out;
  };
  return {
    blobs: async () =>
      (await names(`${prefix}blobs/sha256/`))
        .map((p) => p.split('/').pop() ?? '')
        .filter((p) => /^[0-9a-f]{64}$/.test(p))
        .sort(),
    staged: async () => {
      const staging = `${prefix}staging/`;
      const uploads: string[] = [];
      for await (const u of client.listIncompleteUploads(bucket, staging, true) as AsyncIterable<{ key: string }>) uploads.push(`upload:${u.key.slice(staging.length)}`);
      return [...(await names(staging)).map((n) => n.slice(staging.length)), ...uploads].sort();
    },
  };
}

/**
 * Replaces the bytes stored under `hex` with `bytes`, behind the server's back, as disk rot or a
 * person editing the bucket would: the one write the probe module does, for the tests of the
 * digest check on reads. The blob must exist.
 */
export async function overwriteBlob(dataDir: string, hex: Sha256Hex, bytes: Buffer): Promise<void> {
  const storage = storageOf(dataDir);
  const rel = `blobs/sha256/${hex.slice(0, 2)}/${hex}`;
  if (storage.backend === 's3') {
    const { client, bucket, prefix } = s3Location(storage);
    await client.statObject(bucket, `${prefix}${rel}`);
    await client.putObject(bucket, `${prefix}${rel}`, bytes, bytes.length);
    return;
  }
  const path = join(storage.path, rel);
  if (!existsSync(path)) throw new Error(`no blob ${hex} in ${storage.path}`);
  writeFileSync(path, bytes);
}
