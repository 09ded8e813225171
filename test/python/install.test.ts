/**
 * Real clients end to end: twine and `uv publish` upload real wheels and sdists, then pip,
 * `uv pip` and `uv add` install from the hosted index alone into fresh environments, beta
 * pulling alpha in as a dependency. Also shows that pip resolves from the PEP 658 metadata
 * siblings without downloading wheels, that yanked files are skipped by both installers, and
 * that the legacy JSON agrees with the Simple page about the uploaded files.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectRecords } from '../../registry/src/python/model/records.js';
import { serverStores } from '../support/store-probe.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { defaultToken, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { CLEAN_ENV, freshPipVenv, freshUvVenv, PROJECT_ENV, requestedPaths } from './fixtures/clients.js';
import { buildProject, type BuiltProject } from './fixtures/projects.js';


let server: Velodex;
let index: string;
let token: string;
let alpha1: BuiltProject;
let alpha11: BuiltProject;
let beta: BuiltProject;

const sha256File = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

async function importAll(venv: string): Promise<string> {
  const res = await run(join(venv, 'bin', 'python'), ['-c', 'import alpha, beta; print(alpha.hello(), "/", beta.hello())']);
  return res.stdout.trim();
}

beforeAll(async () => {
  [alpha1, alpha11, beta] = await Promise.all([buildProject('alpha', '1.0.0'), buildProject('alpha', '1.1.0'), buildProject('beta', '2.0.0')]);
  server = await startVelodex();
  index = `${server.url}/root/hosted/simple/`;
  token = defaultToken(server);
  await run(
    tool('twine'),
    ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${server.url}/root/hosted/`, '-u', '__token__', '-p', token, alpha1.wheel, alpha1.sdist, beta.wheel, beta.sdist],
    { env: CLEAN_ENV },
  );
});

afterAll(async () => {
  await server?.stop();
});

describe('publishing', () => {
  it('uv publish uploads to the hosted index as docs/python.md says', async () => {
    await run(tool('uv'), ['publish', '--publish-url', `${server.url}/root/hosted/`, '--username', '__token__', '--password', token, alpha11.wheel, alpha11.sdist], {
      env: CLEAN_ENV,
    });
    const page = await fetch(`${index}alpha/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
    const doc = (await page.json()) as { versions: string[]; files: { filename: string; hashes: { sha256: string } }[] };
    expect(doc.versions).toEqual(['1.0.0', '1.1.0']);
    expect(doc.files.find((f) => f.filename === alpha11.wheelFilename)?.hashes.sha256).toBe(sha256File(alpha11.wheel));
  });
});

describe('installing', () => {
  it('pip installs beta and pulls alpha as a dependency', async () => {
    const venv = await freshPipVenv();
    const res = await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', '--index-url', index, 'beta'], { env: CLEAN_ENV });
    expect(res.stdout).toMatch(/Successfully installed alpha-1\.1\.0 beta-2\.0\.0/);
    expect(await importAll(venv)).toBe('alpha 1.1.0 / beta 2.0.0');
  });

  it('uv pip installs beta and pulls alpha as a dependency', async () => {
    const venv = await freshUvVenv();
    const res = await run(tool('uv'), ['pip', 'install', '--no-cache', '--python', join(venv, 'bin', 'python'), '--index-url', index, 'beta'], { env: CLEAN_ENV });
    expect(res.stderr).toContain('+ alpha==1.1.0');
    expect(res.stderr).toContain('+ beta==2.0.0');
    expect(await importAll(venv)).toBe('alpha 1.1.0 / beta 2.0.0');
  });

  it('uv add resolves from a [[tool.uv.index]] table and locks velodex URLs', async () => {
    const dir = tempDir('velodex-uvproj-');
    await run(tool('uv'), ['init', '--quiet', '--name', 'app', '--no-workspace', '--python', tool('python'), dir], { env: CLEAN_ENV });
    const pyproject = join(dir, 'pyproject.toml');
    writeFileSync(pyproject, `${readFileSync(pyproject, 'utf8')}\n[[tool.uv.index]]\nname = "velodex"\nurl = "${index}"\ndefault = true\n`);
    await run(tool('uv'), ['add', '--python', tool('python'), 'beta'], { cwd: dir, env: PROJECT_ENV });
    const lock = readFileSync(join(dir, 'uv.lock'), 'utf8');
    expect(lock).toContain(`source = { registry = "${index}" }`);
    expect(lock).toContain(`hash = "sha256:${sha256File(beta.wheel)}"`);
    const res = await run(tool('uv'), ['run', '--python', tool('python'), 'python', '-c', 'import beta; print(beta.hello())'], { cwd: dir, env: PROJECT_ENV });
    expect(res.stdout.trim()).toBe('beta 2.0.0');
  });

  it('pip resolves from the PEP 658 metadata siblings without downloading wheels', async () => {
    const mark = server.logs().length;
    const res = await run(tool('pip'), ['install', '--dry-run', '--quiet', '--report', '-', '--no-cache-dir', '--index-url', index, 'beta'], { env: CLEAN_ENV });
    const report = JSON.parse(res.stdout) as { install: { metadata: { name: string; version: string } }[] };
    expect(report.install.map((i) => `${i.metadata.name}==${i.metadata.version}`).sort()).toEqual(['alpha==1.1.0', 'beta==2.0.0']);
    const paths = requestedPaths(server, mark);
    expect(paths).toContain('/root/hosted/simple/beta/');
    expect(paths).toContain('/root/hosted/simple/alpha/');
    expect(paths.filter((p) => p.endsWith('.whl.metadata')).sort()).toEqual([
      expect.stringMatching(new RegExp(`/files/${sha256File(alpha11.wheel)}/${alpha11.wheelFilename}\\.metadata$`)),
      expect.stringMatching(new RegExp(`/files/${sha256File(beta.wheel)}/${beta.wheelFilename}\\.metadata$`)),
    ]);
    expect(paths.filter((p) => p.endsWith('.whl') || p.endsWith('.tar.gz'))).toEqual([]);
  });

  it('skips a yanked release unless it is pinned', async () => {
    // Yank alpha 1.1.0 the way the (later) yank endpoint will: in its record.
    const records = new ProjectRecords((await serverStores(server.dataDir)).meta);
    const setYank = (value: string | false) =>
      records.update('hosted', 'alpha', (r) => {
        if (!r) return undefined;
        for (const f of Object.values(r.files)) if (f.version === '1.1.0') f.yanked = value;
        return r;
      });
    await setYank('broken release');
    try {
      const dry = async (req: string) => {
        const res = await run(tool('pip'), ['install', '--dry-run', '--quiet', '--report', '-', '--no-cache-dir', '--index-url', index, req], { env: CLEAN_ENV });
        const report = JSON.parse(res.stdout) as { install: { metadata: { version: string }; is_yanked: boolean }[] };
        return { install: report.install[0]!, stderr: res.stderr };
      };
      expect((await dry('alpha')).install.metadata.version).toBe('1.0.0');
      const pinned = await dry('alpha==1.1.0');
      expect(pinned.install).toMatchObject({ metadata: { version: '1.1.0' }, is_yanked: true });
      expect(pinned.stderr).toContain('broken release');

      const uv = await run(tool('uv'), ['pip', 'compile', '--no-cache', '--no-header', '--python', tool('python'), '--index-url', index, '-'], { env: CLEAN_ENV, input: 'beta\n' });
      expect(uv.stdout).toContain('alpha==1.0.0');
    } finally {
      await setYank(false);
    }
  });
});

describe('legacy JSON of real uploads', () => {
  it('agrees with the Simple page and the uploaded bytes', async () => {
    const simple = (await (await fetch(`${index}alpha/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } })).json()) as {
      files: { filename: string; size: number; 'upload-time': string; 'requires-python': string | null; hashes: { sha256: string } }[];
    };
    const doc = (await (await fetch(`${server.url}/root/hosted/alpha/json`)).json()) as {
      info: { version: string; requires_python: string };
      urls: { filename: string; size: number; upload_time_iso_8601: string; requires_python: string | null; digests: { sha256: string } }[];
      releases: Record<string, unknown[]>;
    };
    expect(doc.info.version).toBe('1.1.0');
    expect(doc.info.requires_python).toBe('>=3.8');
    expect(Object.keys(doc.releases)).toEqual(['1.0.0', '1.1.0']);
    expect(doc.urls.map((u) => u.filename).sort()).toEqual([alpha11.sdistFilename, alpha11.wheelFilename].sort());
    for (const u of doc.urls) {
      const s = simple.files.find((f) => f.filename === u.filename)!;
      const local = u.filename.endsWith('.whl') ? alpha11.wheel : alpha11.sdist;
      expect(u.digests.sha256).toBe(sha256File(local));
      expect(u.digests.sha256).toBe(s.hashes.sha256);
      expect(u.size).toBe(readFileSync(local).length);
      expect(u.size).toBe(s.size);
      expect(u.upload_time_iso_8601).toBe(s['upload-time']);
      expect(u.requires_python).toBe(s['requires-python']);
    }
  });
});
