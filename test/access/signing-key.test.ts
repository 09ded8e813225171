/**
 * Where the token signing key comes from (access/signing-key.ts): the configured secret as
 * given; otherwise one key, generated once, whoever asks at the same moment: loaders racing on one
 * data dir, and loaders racing on one shared store (the create-if-absent write the s3 backend
 * does with If-None-Match, here through the fs MetaStore's same contract).
 */
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Secret } from '../../registry/src/config/secret.js';
import type { Config } from '../../registry/src/config/types.js';
import { KEY_FILE, loadSigningKey, SHARED_KEY } from '../../registry/src/access/signing-key.js';
import { FsMetaStore } from '../../registry/src/storage/fs/meta-store.js';
import type { Stores } from '../../registry/src/storage/index.js';
import { tempDir } from '../support/temp-dirs.js';

function config(dataDir: string, key?: string): Config {
  return { dataDir, auth: { tokenSigningKey: key === undefined ? undefined : new Secret(key, 'inline') } } as Config;
}

async function metaStore(): Promise<FsMetaStore> {
  const meta = new FsMetaStore(tempDir('velodex-key-meta-'));
  await meta.init();
  return meta;
}

/** The part of `Stores` the loader reads; `meta` is one store that every loader of a test shares. */
function stores(shared: boolean, meta: FsMetaStore): Stores {
  return { shared, meta } as unknown as Stores;
}

const text = (key: Uint8Array) => Buffer.from(key).toString('utf8');

describe('token signing key', () => {
  it('is the configured secret when one is given, and nothing is generated', async () => {
    const dataDir = tempDir('velodex-key-');
    const key = await loadSigningKey(config(dataDir, 'k'.repeat(40)), stores(true, await metaStore()));
    expect(text(key)).toBe('k'.repeat(40));
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it('is generated once into the data dir, mode 0600, however many loaders race', async () => {
    const dataDir = tempDir('velodex-key-');
    const meta = await metaStore();
    const keys = await Promise.all(Array.from({ length: 8 }, () => loadSigningKey(config(dataDir), stores(false, meta))));
    expect(new Set(keys.map(text)).size).toBe(1);
    expect(text(keys[0] as Uint8Array).length).toBeGreaterThanOrEqual(43);
    expect(readdirSync(dataDir)).toEqual([KEY_FILE]);
    expect(statSync(join(dataDir, KEY_FILE)).mode & 0o777).toBe(0o600);
    expect(text(await loadSigningKey(config(dataDir), stores(false, meta)))).toBe(text(keys[0] as Uint8Array));
    expect(await meta.get(SHARED_KEY)).toBeNull();
  });

  it('is generated once into a shared store, however many loaders race, and nothing goes into the data dir', async () => {
    const meta = await metaStore();
    const dataDirs = Array.from({ length: 8 }, () => tempDir('velodex-key-'));
    const keys = await Promise.all(dataDirs.map((d) => loadSigningKey(config(d), stores(true, meta))));
    expect(new Set(keys.map(text)).size).toBe(1);
    const stored = await meta.get<{ key: string }>(SHARED_KEY);
    expect(stored?.doc.key).toBe(text(keys[0] as Uint8Array));
    for (const d of dataDirs) expect(readdirSync(d)).toEqual([]);
  });

  it('refuses an empty key file with a message that says what to do', async () => {
    const dataDir = tempDir('velodex-key-');
    writeFileSync(join(dataDir, KEY_FILE), '\n');
    await expect(loadSigningKey(config(dataDir), stores(false, await metaStore()))).rejects.toThrow(/token-signing-key is empty: remove it and restart/);
  });
});
