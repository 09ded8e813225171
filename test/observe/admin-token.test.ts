/**
 * The admin token (`[admin] token`): with it set, `/+status?details=admin` and `/admin/status`
 * answer 401 with a Basic challenge of realm "velodex admin" to a request without it or with a
 * wrong one (a line in the security log, without what was sent), and answer a request that sends
 * it as a Bearer token or as the Basic password (curl, as the docs show). The plain `/+status`
 * stays open. A config that gives the token two ways, or empty, is refused.
 *
 * And a burst of admin requests on hosted indexes whose summaries no scan has rebuilt costs one
 * scan per index (counted as store listings through the counted app), not one per request.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, hosted, toml } from '../support/config.js';
import { startCountedApp, stopCountedApp, type CountedApp } from '../support/counted-app.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { postUpload } from '../python/fixtures/upload-client.js';
import { CLI, tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const ADMIN = 'admin-token-5d2a9c71';
const WRONG = 'not-the-admin-token-e40b';
const TOKEN = 'upload-token-71fe';

/** A hosted index at `root/<name>` that takes the suite's upload token. */
const hostedWithToken = (name: string) => hosted(name, { token: TOKEN });

let server: Velodex;
let secretDir: string;
let alpha: BuiltProject;
let beta: BuiltProject;

beforeAll(async () => {
  [alpha, beta] = await Promise.all([buildProject('admin-alpha', '1.0'), buildProject('admin-beta', '1.0')]);
  secretDir = tempDir('velodex-admin-secret-');
  writeFileSync(join(secretDir, 'admin-token'), `${ADMIN}\n`);
  server = await startVelodex({ config: toml(admin({ file: join(secretDir, 'admin-token') }), hostedWithToken('hosted')) });
  expect((await postUpload({ url: `${server.url}/root/hosted/`, token: TOKEN, file: alpha.wheel })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await server?.stop();
});

interface Answer {
  status: number;
  headers: string;
  body: string;
}

/** `curl -i` of `path`, with extra curl arguments (`-u`, `-H`). */
async function curl(path: string, ...args: string[]): Promise<Answer> {
  const res = await run(tool('curl'), ['-sS', '-i', ...args, `${server.url}${path}`]);
  const split = res.stdout.indexOf('\r\n\r\n');
  const headers = res.stdout.slice(0, split);
  return { status: Number(/^HTTP\/[\d.]+ (\d{3})/.exec(headers)?.[1]), headers, body: res.stdout.slice(split + 4) };
}

type AuthLine = { event?: string; index?: string; reason?: string; client?: string; method?: string };
const authFailures = (): AuthLine[] =>
  server
    .logs()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as AuthLine)
    .filter((l) => l.event === 'auth_failed');

describe('with [admin] token set', () => {
  it('refuses /+status?details=admin without the token, or with a wrong one, with a Basic challenge', async () => {
    const missing = await curl('/+status?details=admin');
    expect(missing.status).toBe(401);
    expect(missing.headers).toMatch(/^www-authenticate: Basic realm="velodex admin", charset="UTF-8"\r?$/im);
    expect(missing.headers).toMatch(/^cache-control: no-store\r?$/im);
    expect((JSON.parse(missing.body) as { message: string }).message).toMatch(/needs the admin token.*Authorization: Bearer <token>.*Basic/);
    for (const args of [['-H', `Authorization: Bearer ${WRONG}`], ['-u', `admin:${WRONG}`], ['-u', `${ADMIN}:`]]) {
      const wrong = await curl('/+status?details=admin', ...args);
      expect(wrong.status, args.join(' ')).toBe(401);
      expect((JSON.parse(wrong.body) as { message: string }).message).toBe('the admin token is wrong');
    }
  });

  it('answers it with the token as a Bearer credential or as the Basic password', async () => {
    for (const args of [['-H', `Authorization: Bearer ${ADMIN}`], ['-u', `admin:${ADMIN}`]]) {
      const ok = await curl('/+status?details=admin', ...args);
      expect(ok.status, args.join(' ')).toBe(200);
      const doc = JSON.parse(ok.body) as { indexes: Array<{ name: string; details?: { projects: number; files: number } }>; recent_uploads: Array<{ filename: string }> };
      expect(doc.indexes.find((i) => i.name === 'hosted')?.details).toMatchObject({ projects: 1, files: 1 });
      expect(doc.recent_uploads.map((u) => u.filename)).toEqual([alpha.wheelFilename]);
    }
  });

  it('keeps the plain /+status open: it holds no admin detail', async () => {
    const plain = await curl('/+status');
    expect(plain.status).toBe(200);
    const doc = JSON.parse(plain.body) as { indexes: Array<{ details?: unknown }>; recent_uploads?: unknown };
    expect(doc.recent_uploads).toBeUndefined();
    expect(doc.indexes.every((i) => i.details === undefined)).toBe(true);
  });

  it('asks for the token on the /admin/status page, and serves the page with it', async () => {
    const asked = await curl('/admin/status');
    expect(asked.status).toBe(401);
    expect(asked.headers).toMatch(/^www-authenticate: Basic realm="velodex admin"/im);
    expect(asked.headers).toMatch(/^content-type: text\/html/im);
    expect(asked.body).toContain('This page needs the admin token.');
    expect(asked.body).not.toContain('id="app"');
    const wrong = await curl('/admin/status', '-u', `admin:${WRONG}`);
    expect(wrong.status).toBe(401);
    expect(wrong.body).toContain('The admin token given is wrong.');
    const shown = await curl('/admin/status', '-u', `admin:${ADMIN}`);
    expect(shown.status).toBe(200);
    expect(shown.body).toContain('id="app"');
  });

  it('logs each refusal in the security log, without what was sent', () => {
    const lines = authFailures();
    expect(lines).toContainEqual(expect.objectContaining({ index: '/+status', method: 'GET', client: '127.0.0.1', reason: 'missing-credentials' }));
    expect(lines).toContainEqual(expect.objectContaining({ index: '/+status', reason: 'wrong-credentials' }));
    expect(lines).toContainEqual(expect.objectContaining({ index: '/admin/status', reason: 'missing-credentials' }));
    expect(lines).toContainEqual(expect.objectContaining({ index: '/admin/status', reason: 'wrong-credentials' }));
    const logs = server.logs();
    for (const secret of [ADMIN, WRONG, Buffer.from(`admin:${ADMIN}`).toString('base64'), Buffer.from(`admin:${WRONG}`).toString('base64')]) expect(logs).not.toContain(secret);
  });

  it('check-config says where the token comes from, never the token', async () => {
    const out = (await run(process.execPath, [CLI, 'check-config', join(server.dataDir, 'velodex.toml')])).stdout;
    expect(out).toContain(`admin token: file ${join(secretDir, 'admin-token')}`);
    expect(out).not.toContain(ADMIN);
  });
});

describe('the [admin] table', () => {
  it('refuses a token given two ways, or empty, naming the key', async () => {
    const dir = tempDir('velodex-admin-config-');
    for (const [table, key] of [
      [`[admin]\ntoken = "a"\ntoken_env = "HOME"\n`, 'admin.token'],
      [`[admin]\ntoken = "  "\n`, 'admin.token'],
      [`[admin]\ntoken_file = "${join(dir, 'absent')}"\n`, 'admin.token_file'],
      [`[admin]\ntokens = "a"\n`, 'tokens'],
    ] as const) {
      const path = join(dir, 'velodex.toml');
      writeFileSync(path, `${table}${toml(hostedWithToken('hosted'))}`);
      const res = await run(process.execPath, [CLI, 'check-config', path], { allowFailure: true });
      expect(res.code, table).toBe(78);
      expect(res.stderr, table).toContain(key);
    }
  });

  it('without it, check-config says the admin surfaces are open', async () => {
    const path = join(tempDir('velodex-admin-config-'), 'velodex.toml');
    writeFileSync(path, toml(hostedWithToken('hosted')));
    expect((await run(process.execPath, [CLI, 'check-config', path])).stdout).toContain('admin token: none: /admin/status and /+status?details=admin answer anyone');
  });
});

describe('without [admin] token', () => {
  let open: Velodex | undefined;

  afterAll(async () => {
    await open?.stop();
  });

  it('refuses the admin actions (403 naming the key), though the admin pages are open', async () => {
    open = await startVelodex({ config: toml(hostedWithToken('hosted')) });
    for (const action of ['/+admin/gc?dry_run=1', '/+admin/retention?dry_run=1']) {
      const res = await fetch(`${open.url}${action}`, { method: 'POST' });
      expect(res.status, action).toBe(403);
      expect(await res.text(), action).toContain('[admin] token');
    }
    expect((await fetch(`${open.url}/+status?details=admin`)).status).toBe(200);
  });
});

describe('a burst of admin requests', () => {
  let app: CountedApp | undefined;

  afterAll(async () => {
    await stopCountedApp(app);
  });

  it('on indexes no scan has rebuilt costs one scan per index, not one per request', async () => {
    app = await startCountedApp(tempDir('velodex-admin-burst-'), 'one', toml(admin(ADMIN), hostedWithToken('first'), hostedWithToken('second')));
    for (const [index, file] of [['first', alpha.wheel], ['first', alpha.sdist], ['second', beta.wheel]] as const) {
      expect((await postUpload({ url: `${app.url}/root/${index}/`, token: TOKEN, file })).status).toBe(200);
    }
    app.counter.reset();
    const burst = await Promise.all(
      Array.from({ length: 16 }, () => fetch(`${app!.url}/+status?details=admin`, { headers: { authorization: `Bearer ${ADMIN}` } }).then(async (r) => ({ status: r.status, doc: (await r.json()) as { indexes: Array<{ name: string; details: { files: number; source: string } }> } }))),
    );
    expect(burst.map((b) => b.status)).toEqual(Array(16).fill(200));
    for (const { doc } of burst) expect(doc.indexes.map((i) => [i.name, i.details.files])).toEqual([['first', 2], ['second', 1]]);
    // A scan lists the index's records once: two indexes, two listings, whatever the burst.
    expect(app.counter.snapshot().calls['meta.list']).toBe(2);

    app.counter.reset();
    const after = (await (await fetch(`${app.url}/+status?details=admin`, { headers: { authorization: `Bearer ${ADMIN}` } })).json()) as { indexes: Array<{ details: { source: string } }> };
    expect(after.indexes.map((i) => i.details.source)).toEqual(['summary', 'summary']);
    expect(app.counter.snapshot().calls['meta.list']).toBeUndefined();
    // The counted app answers 401 too (the token is checked before anything is read).
    const refused = await fetch(`${app.url}/+status?details=admin`);
    expect(refused.status).toBe(401);
  });
});
