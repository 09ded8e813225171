/** Upload sessions on their own: chunk rollback, idle expiry with spool cleanup, orphan removal. */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, expect, it } from 'vitest';
import { UploadSessions } from '../../registry/src/oci/upload-sessions.js';
import { tempDir } from '../support/velodex.js';
import { sha256 } from './api-support.js';

let sessions: UploadSessions | undefined;

afterEach(async () => {
  await sessions?.close();
  sessions = undefined;
});

it('hashes chunks incrementally and undoes a chunk whose source fails midway', async () => {
  const dir = tempDir('velodex-sessions-');
  sessions = new UploadSessions(dir);
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
  expect(readFileSync(s.spoolPath, 'utf8')).toBe('hello ');
  await sessions.append(s, Readable.from([Buffer.from('world')]));
  expect(sessions.digest(s)).toBe(sha256('hello world'));
  expect(readFileSync(s.spoolPath, 'utf8')).toBe('hello world');
});

it('expires idle sessions and removes their spool files', async () => {
  const dir = tempDir('velodex-sessions-');
  sessions = new UploadSessions(dir, 50);
  const s = await sessions.open('oci', 'root/oci/app');
  expect(existsSync(s.spoolPath)).toBe(true);
  await sessions.sweep(Date.now() + 1000);
  expect(sessions.get(s.id, 'oci', 'root/oci/app')).toBeUndefined();
  expect(existsSync(s.spoolPath)).toBe(false);
});

it('removes spool files a previous process left behind, and nothing else', async () => {
  const dir = tempDir('velodex-sessions-');
  writeFileSync(join(dir, 'oci-upload-stale'), 'old bytes');
  writeFileSync(join(dir, 'someone-elses-file'), 'keep');
  sessions = new UploadSessions(dir);
  const live = await sessions.open('oci', 'root/oci/app');
  await sessions.removeOrphans();
  expect(readdirSync(dir).sort()).toEqual([live.spoolPath.split('/').pop(), 'someone-elses-file'].sort());
});
