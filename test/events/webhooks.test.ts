/**
 * Webhooks through the real server: twine uploads and HTTP mutations produce signed deliveries
 * to a real receiver, filtered per target; duplicates and zero-change mutations produce none; a
 * write through a virtual route reaches the virtual's targets and its upload target's; no
 * secret, token or query string reaches the server log.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { postUpload, sha256File } from '../python/fixtures/upload-client.js';
import { write } from '../python/mutations-client.js';
import { displayUrl } from '../../registry/src/config/sanitize.js';
import { cached, hosted, toml, virtual } from '../support/config.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { expectedSignature, outboxIds, Receiver, until, type Delivery } from './receiver.js';

const TOKEN = 'rel-upload-token-8d1f';
const UP_TOKEN = 'upstream-token-55ac';
const ALL_SECRET = 'all-hook-secret-3e9b';
const UPLOADS_SECRET = 'uploads-hook-secret-a71c';
const QUERY_SECRET = 'query-secret-0f4e';
/** User info in a target URL becomes Basic credentials (fetch refuses URLs that carry them). */
const HOOK_USER = 'hook-user';
const HOOK_PASS = 'hook:pass@7b3e';
/** A chat-style receiver whose path is its key: the URL comes from a file (url_file), as a secret. */
const FILE_HOOK_PATH = '/services/T0F1/B0F2/file-url-key-2d7c';
const CLEAN_ENV = { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' };

const receiver = new Receiver();
let upstream: Velodex;
let server: Velodex;
let alpha: BuiltProject;
let beta: BuiltProject;
let gamma: BuiltProject;

beforeAll(async () => {
  [alpha, beta, gamma] = await Promise.all([buildProject('alpha', '1.0'), buildProject('beta', '1.0'), buildProject('gamma', '1.0')]);
  await receiver.start();
  const hookUrlFile = join(tempDir('velodex-hook-url-'), 'url');
  writeFileSync(hookUrlFile, `${receiver.url}${FILE_HOOK_PATH}\n`);
  upstream = await startVelodex({ config: toml(hosted('up', { token: UP_TOKEN })) });
  for (const file of [gamma.wheel, gamma.sdist]) {
    expect((await postUpload({ url: `${upstream.url}/root/up/`, token: UP_TOKEN, file })).status).toBe(200);
  }
  server = await startVelodex({
    env: { REL_TOKEN: TOKEN, HOOK_ALL: ALL_SECRET, HOOK_UPLOADS: UPLOADS_SECRET },
    config: toml(
      hosted('rel', {
        token: { env: 'REL_TOKEN' },
        volatile: true,
        webhooks: [
          { url: `${receiver.url}/uploads`, secret: { env: 'HOOK_UPLOADS' }, events: ['upload'] },
          { url: `${receiver.url}/all?key=${QUERY_SECRET}`, secret: { env: 'HOOK_ALL' } },
          { url: `http://${HOOK_USER}:${encodeURIComponent(HOOK_PASS)}@${new URL(receiver.url).host}/basic`, events: ['upload'] },
          { url: { file: hookUrlFile }, events: ['upload'] },
        ],
      }),
      cached('mirror', `${upstream.url}/root/up/simple/`),
      virtual('dev', ['rel', 'mirror'], { uploadTarget: 'rel', webhooks: [{ url: `${receiver.url}/dev` }] }),
    ),
  });
});

afterAll(async () => {
  await server?.stop();
  await upstream?.stop();
  await receiver.stop();
});

const rel = () => `${server.url}/root/rel`;
const dev = () => `${server.url}/root/dev`;

/** Every delivery enqueued so far has been delivered. */
const drained = () => until(async () => (await outboxIds(server.dataDir)).length === 0, 10_000, async () => `outbox still holds ${(await outboxIds(server.dataDir)).join(', ')}`);

const events = (path: string) => receiver.at(path).map((d) => d.json.event);

function expectHeaders(d: Delivery, event: string, secret: string | null): void {
  expect(d.headers['x-velodex-event']).toBe(event);
  expect(d.headers['x-velodex-delivery']).toMatch(/^[0-9a-f-]{36}$/);
  expect(d.headers['x-velodex-timestamp']).toMatch(/^\d{10}$/);
  expect(d.headers['content-type']).toBe('application/json');
  expect(d.headers['user-agent']).toBe('velodex-webhooks');
  expect(d.headers.authorization).toBeUndefined();
  if (secret === null) expect(d.headers['x-velodex-signature']).toBeUndefined();
  else expect(d.headers['x-velodex-signature']).toBe(expectedSignature(secret, d));
}

describe('webhook deliveries', () => {
  it('twine uploads reach both targets, signed with each target secret', async () => {
    await run(
      tool('twine'),
      ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${rel()}/`, '-u', '__token__', '-p', TOKEN, alpha.wheel, alpha.sdist],
      { env: CLEAN_ENV },
    );
    const uploads = await receiver.waitFor('/uploads', 2);
    const all = await receiver.waitFor('/all', 2);
    for (const [path, list, secret] of [['/uploads', uploads, UPLOADS_SECRET], ['/all', all, ALL_SECRET]] as const) {
      expect(list.map((d) => (d.json.file as { filename: string }).filename).sort(), path).toEqual([alpha.sdistFilename, alpha.wheelFilename].sort());
      for (const d of list) expectHeaders(d, 'upload', secret);
    }
    expect(all[0]?.query).toBe(`key=${QUERY_SECRET}`);
    const wheel = all.find((d) => (d.json.file as { filename: string }).filename === alpha.wheelFilename)!;
    expect(wheel.json).toEqual({
      event: 'upload',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/) as unknown,
      index: 'rel',
      route: 'root/rel',
      local_index: 'rel',
      project: 'alpha',
      version: '1.0',
      count: 1,
      file: { filename: alpha.wheelFilename, sha256: await sha256File(alpha.wheel) },
      actor: '__token__',
      request_id: expect.any(String) as unknown,
    });
    const basic = await receiver.waitFor('/basic', 2);
    expect(basic.map((d) => d.headers.authorization)).toEqual(Array(2).fill(`Basic ${Buffer.from(`${HOOK_USER}:${HOOK_PASS}`).toString('base64')}`));
    // The target whose URL came from a file gets the same deliveries.
    const fromFile = await receiver.waitFor(FILE_HOOK_PATH, 2);
    expect(fromFile.map((d) => (d.json.file as { filename: string }).filename).sort()).toEqual([alpha.sdistFilename, alpha.wheelFilename].sort());
    for (const d of fromFile) expectHeaders(d, 'upload', null);
    // One delivery per target: distinct ids.
    const ids = new Set([...uploads, ...all].map((d) => d.headers['x-velodex-delivery']));
    expect(ids.size).toBe(4);
  });

  it('a duplicate upload with identical bytes enqueues nothing', async () => {
    const again = await postUpload({ url: `${rel()}/`, token: TOKEN, file: alpha.wheel });
    expect(again.status).toBe(200);
    expect(JSON.parse(again.body)).toMatchObject({ duplicate: true });
    // Anything the duplicate enqueued would be delivered along with this yank.
    expect((await write('PUT', `${rel()}/alpha/1.0/yank`, { token: TOKEN })).json).toMatchObject({ changed: 2 });
    await receiver.waitFor('/all', 3);
    await drained();
    expect(events('/uploads')).toEqual(['upload', 'upload']);
    expect(events('/all')).toEqual(['upload', 'upload', 'yank']);
  });

  it('yank, unyank and delete reach the unfiltered target only; zero-change mutations send nothing', async () => {
    const yank = receiver.at('/all')[2]!;
    expectHeaders(yank, 'yank', ALL_SECRET);
    expect(yank.json).toMatchObject({ event: 'yank', index: 'rel', route: 'root/rel', local_index: 'rel', project: 'alpha', version: '1.0', count: 2, actor: '__token__' });
    expect(yank.json).not.toHaveProperty('file');

    expect((await write('PUT', `${rel()}/alpha/1.0/yank`, { token: TOKEN })).json).toMatchObject({ changed: 0 });
    expect((await write('DELETE', `${rel()}/alpha/yank`, { token: TOKEN })).json).toMatchObject({ action: 'unyank', changed: 2 });
    expect((await write('DELETE', `${rel()}/alpha/yank`, { token: TOKEN })).json).toMatchObject({ changed: 0 });
    expect((await write('DELETE', `${rel()}/alpha/1.0/`, { token: TOKEN })).json).toMatchObject({ action: 'delete', changed: 2 });
    await receiver.waitFor('/all', 5);
    await drained();
    expect(events('/all')).toEqual(['upload', 'upload', 'yank', 'unyank', 'delete']);
    expect(events('/uploads')).toEqual(['upload', 'upload']);
    const [unyank, del] = receiver.at('/all').slice(3);
    expectHeaders(unyank!, 'unyank', ALL_SECRET);
    expect(unyank!.json).toMatchObject({ project: 'alpha', count: 2 });
    expect(unyank!.json).not.toHaveProperty('version');
    expectHeaders(del!, 'delete', ALL_SECRET);
    expect(del!.json).toMatchObject({ project: 'alpha', version: '1.0', count: 2, local_index: 'rel' });
  });

  it('delete and restore of cached files through a virtual route reach the virtual target, unsigned', async () => {
    expect((await write('DELETE', `${dev()}/gamma/1.0/`, { token: TOKEN })).json).toMatchObject({ action: 'delete', changed: 2 });
    expect((await write('PUT', `${dev()}/gamma/1.0/restore`, { token: TOKEN })).json).toMatchObject({ action: 'restore', changed: 2 });
    expect((await write('PUT', `${dev()}/gamma/1.0/restore`, { token: TOKEN })).json).toMatchObject({ changed: 0 });
    const [del, restore] = await receiver.waitFor('/dev', 2);
    await drained();
    expectHeaders(del!, 'delete', null);
    expectHeaders(restore!, 'restore', null);
    expect(restore!.json).toMatchObject({ event: 'restore', index: 'dev', route: 'root/dev', local_index: 'dev', project: 'gamma', version: '1.0', count: 2 });
    expect(events('/dev')).toEqual(['delete', 'restore']);
    // Only the cached overrides of the virtual changed: the hosted index's targets hear nothing.
    expect(events('/all')).toHaveLength(5);
  });

  it("an upload through the virtual reaches the virtual's target and its upload target's", async () => {
    expect((await postUpload({ url: `${dev()}/`, token: TOKEN, file: beta.wheel })).status).toBe(200);
    const [atDev] = (await receiver.waitFor('/dev', 3)).slice(2);
    const [atUploads] = (await receiver.waitFor('/uploads', 3)).slice(2);
    const [atAll] = (await receiver.waitFor('/all', 6)).slice(5);
    for (const d of [atDev, atUploads, atAll]) {
      expect(d!.json).toMatchObject({ event: 'upload', index: 'dev', route: 'root/dev', local_index: 'rel', project: 'beta', file: { filename: beta.wheelFilename } });
    }
    // The same body bytes go to every target of one event.
    expect(atDev!.body.equals(atAll!.body)).toBe(true);
    expectHeaders(atUploads!, 'upload', UPLOADS_SECRET);
  });

  it('keeps secrets, tokens and query strings out of the server log', async () => {
    await drained();
    const logs = server.logs();
    expect(logs).toContain('webhook delivered');
    // The target as scheme and host, the path and query a fingerprint (Slack-style URLs carry their secret there).
    expect(logs).toContain(`"url":"${displayUrl(`${receiver.url}/all?key=${QUERY_SECRET}`)}"`);
    expect(logs).not.toContain(`${receiver.url}/all`);
    for (const secret of [TOKEN, ALL_SECRET, UPLOADS_SECRET, QUERY_SECRET, HOOK_PASS, encodeURIComponent(HOOK_PASS), Buffer.from(`__token__:${TOKEN}`).toString('base64'), FILE_HOOK_PATH]) {
      expect(logs).not.toContain(secret);
    }
    for (const d of receiver.deliveries) {
      const text = d.body.toString('utf8');
      for (const secret of [TOKEN, ALL_SECRET, UPLOADS_SECRET, QUERY_SECRET]) expect(text).not.toContain(secret);
    }
  });
});
