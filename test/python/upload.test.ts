/**
 * The upload path of a hosted Python index, driven by the real clients (twine, uv publish) and,
 * for the uploads those clients refuse to send, by a bare multipart client. Every refusal is
 * checked for its status and message and for leaving nothing behind: no record, no blob, no spool
 * file.
 */
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { defaultToken, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { makeBigWheel, mutateSdist, mutateWheel } from './fixtures/archives.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';
import { projectRecord, storeState } from './fixtures/store.js';
import { postUpload, sha256File, type UploadResponse } from './fixtures/upload-client.js';

const JSON_TYPE = 'application/vnd.pypi.simple.v1+json';

interface SimpleFile {
  filename: string;
  hashes: { sha256: string };
  'core-metadata': { sha256: string } | false;
}

let server: Velodex;
let token: string;
let indexUrl: string;
let scratch: string;
let alpha1: BuiltProject;
let alpha2: BuiltProject;
let beta1: BuiltProject;

beforeAll(async () => {
  [alpha1, alpha2, beta1] = await Promise.all([buildProject('alpha', '1.0'), buildProject('alpha', '2.0'), buildProject('beta', '1.0')]);
  server = await startVelodex();
  token = defaultToken(server);
  indexUrl = `${server.url}/root/hosted/`;
  scratch = tempDir('velodex-upload-');
});

afterAll(async () => {
  await server?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  if (server) rmSync(server.dataDir, { recursive: true, force: true });
});

function twine(files: string[], password = token, url = indexUrl) {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', url, '-u', '__token__', '-p', password, ...files], {
    allowFailure: true,
    env: { NO_COLOR: '1', COLUMNS: '200' },
  });
}

function uvPublish(files: string[], auth: string[]) {
  return run(tool('uv'), ['publish', '--publish-url', indexUrl, ...auth, ...files], {
    allowFailure: true,
    env: { UV_CACHE_DIR: join(scratch, 'uv-cache'), NO_COLOR: '1' },
  });
}

async function simpleFiles(project: string): Promise<SimpleFile[]> {
  const res = await fetch(`${server.url}/root/hosted/simple/${project}/`, { headers: { accept: JSON_TYPE } });
  if (res.status === 404) return [];
  expect(res.status).toBe(200);
  return ((await res.json()) as { files: SimpleFile[] }).files;
}

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** The wheel's METADATA bytes, read with Python's zipfile. */
async function wheelMetadata(wheel: string): Promise<Buffer> {
  const script = 'import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nsys.stdout.write(next(z.read(n) for n in z.namelist() if n.endswith(".dist-info/METADATA")).hex())';
  const { stdout } = await run(tool('python'), ['-c', script, wheel]);
  return Buffer.from(stdout.trim(), 'hex');
}

/** Everything a refused upload must leave as it was, read from the server's store. */
async function snapshot(): Promise<string> {
  const state = await storeState(server.dataDir);
  const records = await Promise.all(state.projects.map((p) => projectRecord(server.dataDir, p)));
  return JSON.stringify({ blobs: state.blobs, projects: state.projects, records });
}

async function nothingStaged(): Promise<void> {
  // The server cleans up after a dropped connection asynchronously; give it a moment.
  for (let i = 0; i < 50 && (await storeState(server.dataDir)).staged.length > 0; i++) await sleep(100);
  expect((await storeState(server.dataDir)).staged).toEqual([]);
}

/** Sends an upload that must be refused, and checks that nothing became visible. */
async function refused(send: () => Promise<UploadResponse>, status: number, message: RegExp): Promise<UploadResponse> {
  const before = await snapshot();
  const res = await send();
  expect(res.status, res.body).toBe(status);
  const body = JSON.parse(res.body) as { message: string };
  expect(body.message).toMatch(message);
  // The reason phrase carries the message too (that is what twine prints).
  expect(res.statusMessage).toMatch(message);
  expect(await snapshot()).toEqual(before);
  await nothingStaged();
  return res;
}

describe('uploads with the real clients', () => {
  it('twine uploads a wheel and an sdist, which the Simple API then lists with their hashes and metadata', async () => {
    const out = await twine([alpha1.wheel, alpha1.sdist]);
    expect(out.code, out.stdout + out.stderr).toBe(0);

    const files = await simpleFiles('alpha');
    const byName = new Map(files.map((f) => [f.filename, f]));
    expect([...byName.keys()].sort()).toEqual([alpha1.sdistFilename, alpha1.wheelFilename].sort());
    expect(byName.get(alpha1.wheelFilename)?.hashes.sha256).toBe(sha256(alpha1.wheel));
    expect(byName.get(alpha1.sdistFilename)?.hashes.sha256).toBe(sha256(alpha1.sdist));
    // The wheel's METADATA is stored and served as the PEP 658 sibling.
    const metadata = await wheelMetadata(alpha1.wheel);
    expect(byName.get(alpha1.wheelFilename)?.['core-metadata']).toEqual({ sha256: createHash('sha256').update(metadata).digest('hex') });
    const sibling = await fetch(`${server.url}/root/hosted/files/${sha256(alpha1.wheel)}/${alpha1.wheelFilename}.metadata`);
    expect(sibling.status).toBe(200);
    expect(Buffer.from(await sibling.arrayBuffer()).equals(metadata)).toBe(true);
    // The artifact downloads byte for byte.
    const download = await fetch(`${server.url}/root/hosted/files/${sha256(alpha1.sdist)}/${alpha1.sdistFilename}`);
    expect(Buffer.from(await download.arrayBuffer()).equals(readFileSync(alpha1.sdist))).toBe(true);
    await nothingStaged();
  });

  it('uv publish uploads with --token and with -u/-p', async () => {
    const withToken = await uvPublish([beta1.wheel], ['--token', token]);
    expect(withToken.code, withToken.stderr).toBe(0);
    const withPassword = await uvPublish([beta1.sdist], ['-u', '__token__', '-p', token]);
    expect(withPassword.code, withPassword.stderr).toBe(0);
    const files = await simpleFiles('beta');
    expect(files.map((f) => f.filename).sort()).toEqual([beta1.sdistFilename, beta1.wheelFilename].sort());
  });

  it('accepts a re-upload of identical bytes quietly, without a second record', async () => {
    const before = await snapshot();
    const out = await twine([alpha1.wheel]);
    expect(out.code, out.stdout + out.stderr).toBe(0);
    const raw = await postUpload({ url: indexUrl, token, file: alpha1.sdist });
    expect(raw.status).toBe(200);
    expect(JSON.parse(raw.body)).toMatchObject({ duplicate: true, sha256: sha256(alpha1.sdist) });
    expect(await snapshot()).toEqual(before);
    expect(await simpleFiles('alpha')).toHaveLength(2);
  });

  it('refuses the same filename with other bytes, and twine shows why', async () => {
    const other = await buildProject('alpha', '1.0', { variant: 'other bytes' });
    expect(sha256(other.wheel)).not.toBe(sha256(alpha1.wheel));
    const before = await snapshot();
    const out = await twine([other.wheel]);
    expect(out.code).not.toBe(0);
    expect(out.stdout + out.stderr).toMatch(/400 Bad Request/);
    expect(out.stdout + out.stderr).toMatch(/already exists/);
    expect(await snapshot()).toEqual(before);
    await refused(() => postUpload({ url: indexUrl, token, file: other.wheel }), 400, /already exists/);
  });

  it('refuses a wrong or missing token with 401 and a Basic challenge; twine shows the message', async () => {
    const out = await twine([alpha2.wheel], 'not-the-token');
    expect(out.code).not.toBe(0);
    expect(out.stdout + out.stderr).toMatch(/401 Unauthorized/);
    expect(out.stdout + out.stderr).toMatch(/upload token is wrong/);

    const uv = await uvPublish([alpha2.wheel], ['--token', 'not-the-token']);
    expect(uv.code).not.toBe(0);
    expect(uv.stderr).toMatch(/401/);

    const missing = await refused(() => postUpload({ url: indexUrl, token: null, file: alpha2.wheel }), 401, /authentication required/);
    expect(missing.headers['www-authenticate']).toBe('Basic realm="velodex"');
    const wrong = await refused(() => postUpload({ url: indexUrl, token: 'nope', file: alpha2.wheel }), 401, /upload token is wrong/);
    expect(wrong.headers['www-authenticate']).toBe('Basic realm="velodex"');
  });
});

describe('refusals of malformed uploads', () => {
  const up = (file: string, fields: Record<string, string | null> = {}, filename?: string) => () =>
    postUpload({ url: indexUrl, token, file, fields, ...(filename ? { filename } : {}) });

  it('checks the form against the file', async () => {
    await refused(up(alpha2.wheel, { filetype: 'sdist' }), 400, /filetype=sdist.*wheel.*bdist_wheel/);
    await refused(up(alpha2.sdist, { filetype: 'bdist_wheel' }), 400, /filetype=bdist_wheel.*sdist/);
    await refused(up(alpha2.wheel, { name: 'beta' }), 400, /name=beta/);
    await refused(up(alpha2.wheel, { version: '9.9' }), 400, /version=9\.9/);
    await refused(up(alpha2.wheel, { name: null }), 400, /no "name" field/);
    await refused(up(alpha2.wheel, { sha256_digest: '0'.repeat(64) }), 400, /sha256_digest .* does not match/);
  });

  it('accepts only .whl and .tar.gz, and says so', async () => {
    await refused(up(alpha2.sdist, {}, 'alpha-2.0.zip'), 400, /only wheels \(\.whl\) and source distributions \(\.tar\.gz\)/);
    await refused(up(alpha2.wheel, {}, 'alpha-2.0-py3.11.egg'), 400, /only wheels/);
    await refused(up(alpha2.sdist, {}, 'Alpha-2.0.tar.gz'), 400, /PEP 625/);
    await refused(up(alpha2.wheel, {}, 'alpha-2.0-py3-none.whl'), 400, /invalid wheel filename/);
  });

  it('refuses a file whose metadata names another project or version', async () => {
    await refused(up(alpha2.wheel, { name: 'alpha', version: '3.0' }, 'alpha-3.0-py3-none-any.whl'), 400, /dist-info directory must be named alpha_?-?3\.0/);
  });

  const wheelCases: [string, string, string, RegExp][] = [
    ['a member that does not match its RECORD hash', '', "f = find('alpha/__init__.py'); f[1] = f[1] + b'# tampered\\n'", /alpha\/__init__\.py does not match its sha256 hash in alpha-2\.0\.dist-info\/RECORD/],
    [
      'a RECORD size that is wrong',
      '',
      "r = find('.dist-info/RECORD'); r[1] = b''.join((l.rsplit(b',', 1)[0] + b',999\\n') if l.startswith(b'alpha/__init__.py,') else l for l in r[1].splitlines(True))",
      /alpha\/__init__\.py is \d+ bytes but alpha-2\.0\.dist-info\/RECORD says 999/,
    ],
    ['no RECORD', "drop('.dist-info/RECORD')", '', /has no alpha-2\.0\.dist-info\/RECORD/],
    ['no WHEEL', "drop('.dist-info/WHEEL')", '', /has no alpha-2\.0\.dist-info\/WHEEL/],
    ['no METADATA', "drop('.dist-info/METADATA')", '', /has no alpha-2\.0\.dist-info\/METADATA/],
    ['a member missing from RECORD', '', "add('alpha/extra.py', 'x = 1\\n')", /alpha\/extra\.py is not listed in alpha-2\.0\.dist-info\/RECORD/],
    ['a non-normalized .dist-info directory', "rename_dir('alpha-2.0.dist-info/', 'alpha-v2.0.dist-info/')", '', /must be named alpha-2\.0\.dist-info .*found alpha-v2\.0\.dist-info/],
    ['a WHEEL tag that does not match the filename', "replace_text('.dist-info/WHEEL', 'Tag: py3-none-any', 'Tag: py2-none-any')", '', /WHEEL does not match the tags.*missing Tag py3-none-any.*extra Tag py2-none-any/],
    ['a WHEEL build tag without one in the filename', "replace_text('.dist-info/WHEEL', 'Tag: py3-none-any', 'Tag: py3-none-any\\nBuild: 1')", '', /Build: 1, but .* has no build tag/],
    ['METADATA for another version', "replace_text('.dist-info/METADATA', 'Version: 2.0', 'Version: 2.1')", '', /METADATA says Version: 2\.1/],
    ['a member escaping with ..', "add('../evil.py', 'x = 1\\n')", '', /unsafe member/],
    ['an absolute member', "add('/tmp/evil.py', 'x = 1\\n')", '', /unsafe member/],
  ];
  for (const [what, before, after, message] of wheelCases) {
    it(`refuses a wheel with ${what}`, async () => {
      const bad = await mutateWheel(alpha2.wheel, join(scratch, `${what.replace(/\W+/g, '_')}`, alpha2.wheelFilename).replace(/\/([^/]+)$/, '-$1'), before, after);
      await refused(up(bad, {}, alpha2.wheelFilename), 400, message);
    });
  }

  const sdistCases: [string, string, RegExp][] = [
    ['two top-level directories', "add_file('other-2.0/x.txt', 'x')", /exactly one top-level directory, alpha-2\.0\/.*"other-2\.0"/],
    ['no pyproject.toml', "drop('/pyproject.toml')", /has no alpha-2\.0\/pyproject\.toml/],
    ['no PKG-INFO', "drop('/PKG-INFO')", /has no alpha-2\.0\/PKG-INFO/],
    ['a ../ member', "add_file('alpha-2.0/../evil.txt', 'x')", /unsafe member "alpha-2\.0\/\.\.\/evil\.txt" \(parent-directory \("\.\."\) segment\)/],
    ['an absolute member', "add_file('/etc/evil.txt', 'x')", /unsafe member/],
    ['a symlink escaping the project directory', "add_symlink('alpha-2.0/link', '../../etc/passwd')", /symlink alpha-2\.0\/link points outside alpha-2\.0\//],
    ['an absolute symlink', "add_symlink('alpha-2.0/link', '/etc/passwd')", /symlink alpha-2\.0\/link points outside/],
    ['a hard link to outside', "add_hardlink('alpha-2.0/link', 'etc/passwd')", /hard link alpha-2\.0\/link points outside/],
    ['a device file', "add_device('alpha-2.0/dev')", /is a character-device/],
    ['Metadata 2.4+ naming a License-File that is missing', "drop('/LICENSE')", /License-File LICENSE, which is not in the archive/],
    ['PKG-INFO for another project', "replace_text('/PKG-INFO', 'Name: alpha', 'Name: beta')", /PKG-INFO says Name: beta/],
  ];
  for (const [what, code, message] of sdistCases) {
    it(`refuses an sdist with ${what}`, async () => {
      const bad = await mutateSdist(alpha2.sdist, join(scratch, `${what.replace(/\W+/g, '_')}-${alpha2.sdistFilename}`), code);
      await refused(up(bad, {}, alpha2.sdistFilename), 400, message);
    });
  }

  it('refuses bytes that are not an archive at all', async () => {
    const junk = join(scratch, 'junk');
    await run(tool('python'), ['-c', `open(${JSON.stringify(junk)}, "wb").write(b"not a zip" * 100)`]);
    await refused(up(junk, {}, alpha2.wheelFilename), 400, /not a valid zip archive/);
    await refused(up(junk, {}, alpha2.sdistFilename), 400, /not a valid \.tar\.gz archive/);
  });

  it('keeps nothing of an upload whose client disconnects mid-body, and keeps serving', async () => {
    const big = await makeBigWheel(join(scratch), 8 * 1024 * 1024);
    const before = await snapshot();
    const res = await postUpload({ url: indexUrl, token, file: big, abortAfter: 4 * 1024 * 1024 });
    expect(res.status).toBe(0);
    await nothingStaged();
    expect(await snapshot()).toEqual(before);
    // The server is fine: the same file uploads whole afterwards.
    const again = await postUpload({ url: indexUrl, token, file: big });
    expect(again.status, again.body).toBe(200);
    expect((await simpleFiles('big')).map((f) => f.hashes.sha256)).toEqual([await sha256File(big)]);
  });

  it('accepts the good files after all that', async () => {
    const out = await twine([alpha2.wheel, alpha2.sdist]);
    expect(out.code, out.stdout + out.stderr).toBe(0);
    expect((await simpleFiles('alpha')).map((f) => f.filename).sort()).toEqual(
      [alpha1.sdistFilename, alpha1.wheelFilename, alpha2.sdistFilename, alpha2.wheelFilename].sort(),
    );
  });

  it('checks a build tag against WHEEL Build, and accepts a compressed tag set that WHEEL spells out', async () => {
    const built = 'alpha-2.0-1-py3-none-any.whl';
    const noBuild = await mutateWheel(alpha2.wheel, join(scratch, 'no-build.whl'), '');
    await refused(up(noBuild, {}, built), 400, /says no Build, but alpha-2\.0-1-py3-none-any\.whl has build tag 1/);
    const withBuild = await mutateWheel(alpha2.wheel, join(scratch, 'build.whl'), "replace_text('.dist-info/WHEEL', 'Tag: py3-none-any', 'Tag: py3-none-any\\nBuild: 1')");
    expect((await up(withBuild, {}, built)()).status).toBe(200);

    const multi = 'alpha-2.0-py2.py3-none-any.whl';
    await refused(up(noBuild, {}, multi), 400, /missing Tag py2-none-any/);
    const both = await mutateWheel(alpha2.wheel, join(scratch, 'multi.whl'), "replace_text('.dist-info/WHEEL', 'Tag: py3-none-any', 'Tag: py2-none-any\\nTag: py3-none-any')");
    expect((await up(both, {}, multi)()).status).toBe(200);
    expect((await simpleFiles('alpha')).map((f) => f.filename)).toEqual(expect.arrayContaining([built, multi]));
  });

  it('lands concurrent uploads of different files to one project', async () => {
    const builds = await Promise.all(['3.0', '3.1', '3.2'].map((v) => buildProject('alpha', v)));
    const results = await Promise.all(builds.flatMap((b) => [b.wheel, b.sdist]).map((file) => postUpload({ url: indexUrl, token, file })));
    for (const r of results) expect(r.status, r.body).toBe(200);
    const names = (await simpleFiles('alpha')).map((f) => f.filename);
    for (const b of builds) expect(names).toEqual(expect.arrayContaining([b.wheelFilename, b.sdistFilename]));
    await nothingStaged();
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
