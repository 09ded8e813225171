/** Upload sessions on their own: chunk rollback, idle expiry that aborts the session's stage. */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { afterEach, expect, it } from 'vitest';
import { MemoryUploadSessions } from '../../registry/src/oci/read/uploads/memory-sessions.js';
import { SessionBusyError } from '../../registry/src/oci/read/uploads/upload-sessions.js';
import { FsBlobStore } from '../../registry/src/storage/fs/blob-store.js';
import { DigestMismatchError } from '../../registry/src/storage/types.js';
import { tempDir } from '../support/velodex.js';
import { sha256 } from './api-support.js';

let sessions: MemoryUploadSessions | undefined;

afterEach(async () => {
  await sessions?.close();
  sessions = undefined;
});

async function store() {
  const root = tempDir('velodex-sessions-');
  const blobs = new FsBlobStore(root);
  await blobs.init();
  return { blobs, staged: () => readdirSync(join(root, 'staging')) };
}

it('hashes chunks incrementally and undoes a chunk whose source fails midway', async () => {
  const { blobs } = await store();
  sessions = new MemoryUploadSessions(blobs);
  const s = await sessions.open('oci', 'root/oci/app');
  await sessions.append(s, Readable.from([Buffer.from('hello ')]));
  const dying = new Readable({
    read() {
      this.push(Buffer.from('partial'));
      this.destroy(new Error('client went away'));
    },
  });
  await expect(sessions.append(s, dying)).rejects.toThrow('client went away');
  expect(s.size).toBe(6);
  expect(await text(s.stage.readBack())).toBe('hello ');
  await sessions.append(s, Readable.from([Buffer.from('world')]));
  expect(s.stage.digest()).toBe(sha256('hello world'));
  expect(await text(s.stage.readBack())).toBe('hello world');
});

it('undoes a last chunk that leaves the session at another digest, and commits on a retry', async () => {
  const { blobs } = await store();
  sessions = new MemoryUploadSessions(blobs);
  const s = await sessions.open('oci', 'root/oci/app');
  await sessions.append(s, Readable.from([Buffer.from('hello ')]));
  let holds = 0;
  const hold = () => Promise.resolve(void holds++);
  await expect(sessions.commit(s, sha256('hello world'), Readable.from([Buffer.from('there')]), hold)).rejects.toBeInstanceOf(DigestMismatchError);
  expect(s.size).toBe(6);
  expect(holds).toBe(0);
  await sessions.commit(s, sha256('hello world'), Readable.from([Buffer.from('world')]), hold);
  expect(holds).toBe(1);
  expect(await text((await blobs.get(sha256('hello world')))!)).toBe('hello world');
  expect(await sessions.get(s.id, 'oci', 'root/oci/app')).toBeUndefined();
});

it('refuses a second request while one is using the session', async () => {
  const { blobs } = await store();
  sessions = new MemoryUploadSessions(blobs);
  const s = await sessions.open('oci', 'root/oci/app');
  const slow = new Readable({ read() {} });
  const appending = sessions.append(s, slow);
  await expect(sessions.append(s, Readable.from([Buffer.from('x')]))).rejects.toBeInstanceOf(SessionBusyError);
  slow.push(null);
  await appending;
});

it('expires idle sessions and aborts their stages', async () => {
  const { blobs, staged } = await store();
  sessions = new MemoryUploadSessions(blobs, 50);
  const s = await sessions.open('oci', 'root/oci/app');
  expect(staged()).toHaveLength(1);
  await sessions.sweep(Date.now() + 1000);
  expect(await sessions.get(s.id, 'oci', 'root/oci/app')).toBeUndefined();
  expect(staged()).toEqual([]);
});

it('reports only completed chunks while another chunk is still streaming in', async () => {
  const { blobs } = await store();
  sessions = new MemoryUploadSessions(blobs);
  const s = await sessions.open('oci', 'root/oci/app');
  await sessions.append(s, Readable.from([Buffer.from('done ')]));
  const slow = new Readable({ read() {} });
  const appending = sessions.append(s, slow);
  slow.push(Buffer.from('half'));
  // Wait until the stage holds the pushed bytes, then check what the session reports.
  while (s.stage.size < 9) await new Promise((r) => setTimeout(r, 5));
  expect(s.size).toBe(5);
  slow.push(null);
  await appending;
  expect(s.size).toBe(9);
});
