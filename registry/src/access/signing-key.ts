/**
 * Where the token signing key comes from, in order:
 *
 * 1. `[auth] token_signing_key` (inline, `_env` or `_file`): the operator's choice, shared by
 *    every replica because they read the same Secret.
 * 2. With a shared store (s3): a document in the store, created once by whichever replica starts
 *    first with a create-if-absent write (`put(..., null)`); a replica that loses that race reads
 *    the winner's key, so all agree without coordination.
 * 3. Otherwise: `<data_dir>/token-signing-key` (mode 0600), created once. The file is written
 *    whole under a temporary name and linked into place, and `link` refuses an existing name, so
 *    a crash or a second process starting at the same moment never leaves a half-written or a
 *    second key.
 */
import { randomBytes } from 'node:crypto';
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config/types.js';
import type { Stores } from '../storage/index.js';
import { ConflictError, type MetaStore } from '../storage/types.js';

export const SHARED_KEY = 'auth/token-signing-key';
export const KEY_FILE = 'token-signing-key';

interface KeyDoc {
  key: string;
  createdAt: string;
}

export async function loadSigningKey(config: Config, stores: Stores): Promise<Uint8Array> {
  const configured = config.auth.tokenSigningKey;
  if (configured) return Buffer.from(configured.reveal(), 'utf8');
  const key = stores.shared ? await sharedKey(stores.meta) : await dataDirKey(config.dataDir);
  return Buffer.from(key, 'utf8');
}

function freshKey(): string {
  return randomBytes(32).toString('base64url');
}

async function sharedKey(meta: MetaStore): Promise<string> {
  const found = await meta.get<KeyDoc>(SHARED_KEY);
  if (found) return found.doc.key;
  const doc: KeyDoc = { key: freshKey(), createdAt: new Date().toISOString() };
  try {
    await meta.put(SHARED_KEY, doc, null);
    return doc.key;
  } catch (err) {
    if (!(err instanceof ConflictError)) throw err;
  }
  const winner = await meta.get<KeyDoc>(SHARED_KEY);
  if (!winner) throw new Error(`the token signing key ${SHARED_KEY} vanished from the store right after another process created it`);
  return winner.doc.key;
}

async function dataDirKey(dataDir: string): Promise<string> {
  const path = join(dataDir, KEY_FILE);
  const existing = await readKeyFile(path);
  if (existing) return existing;
  await mkdir(dataDir, { recursive: true });
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(temp, `${freshKey()}\n`, { mode: 0o600, flag: 'wx' });
  try {
    await link(temp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await unlink(temp);
  }
  const key = await readKeyFile(path);
  if (!key) throw new Error(`${path} is empty: remove it and restart, and velodex generates a new key`);
  return key;
}

async function readKeyFile(path: string): Promise<string | null> {
  try {
    return (await readFile(path, 'utf8')).trim() || null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}
