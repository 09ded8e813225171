/**
 * Which storage backend the suites run on. vitest runs the suites once on the filesystem backend
 * (its `fs` project) and the server suites once more on s3 (its `s3` project, or any run with
 * `VELODEX_TEST_STORAGE=s3`), where `test/support/s3-global.ts` starts one real MinIO for the whole
 * run and every server a suite starts gets a fresh key prefix of its bucket (so suites never see
 * each other's objects). A suite written against `startVelodex` runs
 * unchanged on either backend; one that is about a backend's own behaviour pins it with its own
 * `[storage]` table.
 */
import { randomUUID } from 'node:crypto';
import { basename } from 'node:path';
import { embeddedDefault } from '../../registry/src/config/default.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { s3Storage, toml, type ConfigPart } from './config.js';

export type TestBackend = 'fs' | 's3';

/** The MinIO of an s3 run, as the global setup hands it to the test processes. */
export interface SharedMinio {
  endpoint: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
}

export const BACKEND_VAR = 'VELODEX_TEST_STORAGE';
const MINIO_VAR = 'VELODEX_TEST_MINIO';
/** The name under which the s3 project's global setup provides the MinIO to its suites. */
export const MINIO_PROVIDED = 'velodexMinio';

export function testBackend(): TestBackend {
  const value = process.env[BACKEND_VAR] ?? 'fs';
  if (value !== 'fs' && value !== 's3') throw new Error(`${BACKEND_VAR}="${value}": use fs or s3`);
  return value;
}

export function sharedMinio(): SharedMinio {
  const raw = process.env[MINIO_VAR];
  if (!raw) throw new Error(`${BACKEND_VAR}=s3 but no MinIO was started: run the suites through vitest (its globalSetup starts one)`);
  return JSON.parse(raw) as SharedMinio;
}

export function publishSharedMinio(minio: SharedMinio): void {
  process.env[MINIO_VAR] = JSON.stringify(minio);
}

/**
 * The prefix of the store of the server with this data dir: one per data dir (temp dirs are
 * unique), so a server restarted on its data dir finds its store again, and a suite that seeds the
 * store before the server starts (`serverStores`) seeds the one the server will open.
 */
export function s3PrefixFor(dataDir: string): string {
  return `t/${basename(dataDir)}`;
}

/** A `[storage]` table for MinIO under a prefix (fresh by default): a server's, or a group's, store. */
export function s3StorageToml(minio: SharedMinio, prefix = `t/${randomUUID()}`): string {
  return toml(s3Storage(minio, { prefix }));
}

/** The embedded default's indexes (one hosted index of every ecosystem), as the file it stands for. */
export function defaultIndexes(dataDir: string, env: NodeJS.ProcessEnv = process.env): ConfigPart {
  // The loader reads the embedded default through the same schema as a file (config/load.ts).
  return embeddedDefault(dataDir, env, ecosystems) as ConfigPart;
}

/**
 * The config text a server of this run starts with. On s3 without a `[storage]` table of its
 * own, the suite's config (or the embedded default, written out as the file it stands for) gets
 * the shared MinIO's table; `storage` lets processes that must share one store pass the same one.
 */
export function configFor(config: string | undefined, dataDir: string, storage?: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (testBackend() === 'fs' || (config !== undefined && /^\s*\[storage\]/m.test(config))) return config;
  const body = config ?? toml(defaultIndexes(dataDir, env));
  // After the suite's text: top-level keys it has (`trusted_proxies = [...]`) must come before
  // any table header, or TOML reads them as keys of that table.
  return `${body}\n${storage ?? s3StorageToml(sharedMinio(), s3PrefixFor(dataDir))}`;
}
