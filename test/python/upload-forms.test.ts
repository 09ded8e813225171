/**
 * The upload form itself (issue 8): real clients sending a form with hundreds of fields (twine and
 * uv send one per classifier and per requirement), and raw forms that are broken in the ways a
 * network or a bad client breaks them. Every answer must come (a hang fails the test through its
 * timeout), malformed forms are 400 with a reason, and nothing of a refused upload is visible.
 */
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tool } from '../support/paths.js';
import { rawRequest, type RawResponse } from '../support/raw-http.js';
import { run } from '../support/run.js';
import { basicAuth, defaultToken, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV, freshPipVenv } from './fixtures/clients.js';
import { fieldPart, filePart, formBody, formType, uploadEntries, type FormField } from './fixtures/form.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';
import { storeState } from './fixtures/store.js';

const JSON_TYPE = 'application/vnd.pypi.simple.v1+json';
/** A client run or a request that takes longer than this has hung. */
const CLIENT_TIMEOUT_MS = 120_000;
const REQUEST_TIMEOUT_MS = 60_000;

let server: Velodex;
let token: string;
let indexUrl: string;
let scratch: string;
let many1: BuiltProject;
let many2: BuiltProject;
let gamma: BuiltProject;

/** ~300 real trove classifiers (hatchling checks them) and 100 extras, one requirement each. */
async function manyFieldsOptions() {
  const script = 'import trove_classifiers as t\nprint("\\n".join(c for c in t.sorted_classifiers if not c.startswith("Private")))';
  const classifiers = (await run(tool('python'), ['-c', script])).stdout.trim().split('\n').slice(0, 300);
  expect(classifiers).toHaveLength(300);
  // Requirements only under extras, so installing the project needs none of them.
  const extras = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`extra${i}`, [`gamma>=1.0`]]));
  return { classifiers, extras };
}

beforeAll(async () => {
  const options = await manyFieldsOptions();
  [many1, many2, gamma] = await Promise.all([buildProject('many', '1.0', options), buildProject('many', '2.0', options), buildProject('gamma', '1.0')]);
  server = await startVelodex();
  token = defaultToken(server);
  indexUrl = `${server.url}/root/hosted/`;
  scratch = tempDir('velodex-upload-forms-');
});

afterAll(async () => {
  await server?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  if (server) rmSync(server.dataDir, { recursive: true, force: true });
});

async function simpleFiles(project: string): Promise<{ filename: string; hashes: { sha256: string } }[]> {
  const res = await fetch(`${server.url}/root/hosted/simple/${project}/`, { headers: { accept: JSON_TYPE } });
  if (res.status === 404) return [];
  expect(res.status).toBe(200);
  return ((await res.json()) as { files: { filename: string; hashes: { sha256: string } }[] }).files;
}

/**
 * Blobs, project records and spool: what a refused upload must leave as it was. The server's own
 * background writes (summaries, counters) stage a document for a moment, so the state returned is
 * one read with nothing staged: the very read that was checked, not a second one after it.
 */
async function settledStore(): Promise<string> {
  let state = await storeState(server.dataDir);
  for (let i = 0; i < 100 && state.staged.length > 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    state = await storeState(server.dataDir);
  }
  return JSON.stringify(state);
}

function post(body: Buffer, contentType: string, extraHeaders: Record<string, string> = {}): Promise<RawResponse> {
  return rawRequest(server.url, '/root/hosted/', 'POST', { 'content-type': contentType, authorization: basicAuth(token), ...extraHeaders }, { body, timeoutMs: REQUEST_TIMEOUT_MS });
}

function expectRefused(res: RawResponse, status: number, message: RegExp): void {
  expect(res.status, res.body).toBe(status);
  expect((JSON.parse(res.body) as { message: string }).message).toMatch(message);
}

describe('real clients with hundreds of metadata fields', () => {
  it('twine uploads a wheel and an sdist with 300 classifiers and 100 requirements', async () => {
    const out = await run(
      tool('twine'),
      ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', indexUrl, '-u', '__token__', '-p', token, many1.wheel, many1.sdist],
      { allowFailure: true, env: { NO_COLOR: '1', COLUMNS: '200' }, timeoutMs: CLIENT_TIMEOUT_MS },
    );
    expect(out.code, out.stdout + out.stderr).toBe(0);
    expect((await simpleFiles('many')).map((f) => f.filename).sort()).toEqual([many1.sdistFilename, many1.wheelFilename].sort());
  });

  it('uv publish uploads the same shape of wheel and sdist', async () => {
    const out = await run(tool('uv'), ['publish', '--publish-url', indexUrl, '--token', token, many2.wheel, many2.sdist], {
      allowFailure: true,
      env: { UV_CACHE_DIR: join(scratch, 'uv-cache'), NO_COLOR: '1' },
      timeoutMs: CLIENT_TIMEOUT_MS,
    });
    expect(out.code, out.stderr).toBe(0);
    expect((await simpleFiles('many')).map((f) => f.filename)).toEqual(expect.arrayContaining([many2.sdistFilename, many2.wheelFilename]));
  });

  it('pip installs what they uploaded', async () => {
    const venv = await freshPipVenv();
    const pip = join(venv, 'bin', 'pip');
    for (const version of ['1.0', '2.0']) {
      await run(pip, ['install', '--no-cache-dir', '--index-url', `${indexUrl}simple/`, `many==${version}`], { env: CLEAN_ENV, timeoutMs: CLIENT_TIMEOUT_MS });
      const shown = await run(pip, ['show', 'many'], { env: CLEAN_ENV });
      expect(shown.stdout).toMatch(new RegExp(`^Version: ${version.replace('.', '\\.')}$`, 'm'));
    }
  });
});

describe('raw forms', () => {
  it('refuses a multipart request without a boundary with 400', async () => {
    const { fields, file } = uploadEntries(gamma.wheel);
    const before = await settledStore();
    const res = await post(formBody('b0undary', [...fields, file]), 'multipart/form-data');
    expectRefused(res, 400, /boundary/i);
    expect(await settledStore()).toEqual(before);
  });

  it('refuses a body cut short inside the form with 400, whatever part it stops in, and keeps nothing', async () => {
    const boundary = 'cut-short-boundary';
    const { fields, file } = uploadEntries(gamma.wheel);
    const whole = formBody(boundary, [...fields, file]);
    const fileStart = whole.indexOf(Buffer.from('name="content"'));
    const before = await settledStore();
    // In a field, in the file's header, in the file's bytes, and just before the closing "--".
    for (const end of [40, fileStart + 10, fileStart + 200, whole.length - `--\r\n`.length]) {
      const res = await post(whole.subarray(0, end), formType(boundary));
      expectRefused(res, 400, /form is malformed or incomplete|did not arrive whole/);
      expect(await settledStore()).toEqual(before);
    }
    expect(await simpleFiles('gamma')).toEqual([]);
  });

  it('accepts 2000 small fields within the total bound', async () => {
    const boundary = 'two-thousand-fields';
    const extra: FormField[] = Array.from({ length: 2000 }, (_, i) => ['classifiers', `Topic :: Test :: ${i}`]);
    const { fields, file } = uploadEntries(gamma.wheel, extra);
    const res = await post(formBody(boundary, [...fields, file]), formType(boundary));
    expect(res.status, res.body).toBe(200);
    expect((await simpleFiles('gamma')).map((f) => f.filename)).toEqual([gamma.wheelFilename]);
  });

  it('refuses text fields over 16 MiB in all, or over 10000 of them, with 400', async () => {
    const boundary = 'too-much-text';
    const big: FormField[] = Array.from({ length: 3 }, () => ['description', 'x'.repeat(6 * 1024 * 1024)]);
    const { fields, file } = uploadEntries(gamma.sdist, big);
    const before = await settledStore();
    const res = await post(formBody(boundary, [...fields, file]), formType(boundary));
    expectRefused(res, 400, /text fields exceed 16777216 bytes in all/);
    expect(await settledStore()).toEqual(before);
    // A flood of empty fields is stopped by the count.
    const tiny = Buffer.concat([...Array.from({ length: 20_000 }, () => fieldPart(boundary, ['k', ''])), filePart(boundary, file), Buffer.from(`--${boundary}--\r\n`)]);
    expectRefused(await post(tiny, formType(boundary)), 400, /more than 10000 text fields/);
    expect(await settledStore()).toEqual(before);
  });

  it('refuses a second content part', async () => {
    const boundary = 'two-files';
    const { fields, file } = uploadEntries(gamma.sdist);
    const before = await settledStore();
    expectRefused(await post(formBody(boundary, [...fields, file, file]), formType(boundary)), 400, /more than one "content" file part/);
    expect(await settledStore()).toEqual(before);
  });
});

describe('digest fields', () => {
  const md5 = () => createHash('md5').update(readFileSync(gamma.sdist)).digest('hex');
  let blake2: string;
  beforeAll(async () => {
    // Python's hashlib, the reference twine computes with.
    const script = 'import hashlib, sys\nprint(hashlib.blake2b(open(sys.argv[1], "rb").read(), digest_size=32).hexdigest())';
    blake2 = (await run(tool('python'), ['-c', script, gamma.sdist])).stdout.trim();
  });
  const blake = () => blake2;

  async function upload(extra: FormField[], after: FormField[] = []): Promise<RawResponse> {
    const boundary = 'digest-check';
    const { fields, file } = uploadEntries(gamma.sdist, extra);
    return post(formBody(boundary, [...fields, file, ...after]), formType(boundary));
  }

  it('refuses an md5_digest, blake2_256_digest or sha256_digest that does not match, naming both values', async () => {
    const before = await settledStore();
    const wrongMd5 = 'f'.repeat(32);
    expectRefused(await upload([['md5_digest', wrongMd5]]), 400, new RegExp(`md5_digest ${wrongMd5} does not match .*\\(md5 ${md5()}\\)`));
    const wrongBlake = 'A'.repeat(64);
    expectRefused(await upload([['blake2_256_digest', wrongBlake]]), 400, new RegExp(`blake2_256_digest ${wrongBlake.toLowerCase()} does not match .*\\(blake2_256 ${blake()}\\)`));
    expectRefused(await upload([['sha256_digest', '0'.repeat(64)]]), 400, /sha256_digest 0{64} does not match/);
    // A claim that comes after the file part is checked all the same.
    expectRefused(await upload([], [['md5_digest', wrongMd5]]), 400, /md5_digest f{32} does not match/);
    expect(await settledStore()).toEqual(before);
  });

  it('accepts matching digests, in any case, before or after the file', async () => {
    const res = await upload([['md5_digest', md5().toUpperCase()]], [['blake2_256_digest', blake()]]);
    expect(res.status, res.body).toBe(200);
    expect((await simpleFiles('gamma')).map((f) => f.filename)).toContain(gamma.sdistFilename);
  });
});

describe('the server after all of the above', () => {
  it('logged no internal error', () => {
    const errors = server
      .logs()
      .split('\n')
      .filter((line) => /"level":(50|60)/.test(line));
    expect(errors).toEqual([]);
  });
});
