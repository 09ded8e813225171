/** Generates the suites' archives once (with Python's zipfile/tarfile) and stores them as blobs. */
import { execFileSync } from 'node:child_process';
import { createReadStream, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ArchiveError, blobSource, type ArchiveErrorKind, type ArchiveSource } from '../../registry/src/archive/index.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { REPO, tool } from '../support/paths.js';
import { tempDir } from '../support/velodex.js';

export interface Fixtures {
  store: FsBlobStore;
  root: string;
  digest(name: string): string;
  source(name: string): Promise<ArchiveSource>;
}

export async function makeFixtures(root = tempDir('velodex-archive-')): Promise<Fixtures> {
  const files = join(root, 'files');
  mkdirSync(files, { recursive: true });
  execFileSync(tool('python'), [join(REPO, 'test', 'archive', 'make_fixtures.py'), files], { stdio: 'inherit' });
  const store = new FsBlobStore(join(root, 'store'));
  await store.init();
  const digests = new Map<string, string>();
  for (const name of readdirSync(files)) digests.set(name, (await store.put(createReadStream(join(files, name)))).digest);
  const digest = (name: string) => {
    const d = digests.get(name);
    if (!d) throw new Error(`no fixture ${name}`);
    return d;
  };
  return {
    store,
    root,
    digest,
    async source(name) {
      const s = await blobSource(store, digest(name));
      if (!s) throw new Error(`fixture ${name} is not stored`);
      return s;
    },
  };
}

/** Awaits a refusal and checks its kind (and message). */
export async function expectArchiveError(work: Promise<unknown>, kind: ArchiveErrorKind, message?: RegExp): Promise<ArchiveError> {
  const err = await work.then(
    (value) => {
      throw new Error(`expected an ArchiveError(${kind}), got ${JSON.stringify(value)?.slice(0, 300)}`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ArchiveError);
  const archiveErr = err as ArchiveError;
  expect({ kind: archiveErr.kind, message: archiveErr.message }).toMatchObject({ kind });
  if (message) expect(archiveErr.message).toMatch(message);
  return archiveErr;
}
