/**
 * Real Python clients configured only from the texts `GET /{route}/+api` returns: twine uploads
 * with the returned `.pypirc` (the real token put in for `<upload-token>`), pip installs with the
 * returned `pip.conf`, uv resolves and syncs with the returned `[[tool.uv.index]]`, and `uv build`
 * still finds its build backend with that text in place.
 *
 * The indexes: `private` (hosted), `standin` (hosted, holds hatchling and its dependencies: it
 * plays PyPI, which tests must not reach), `standin-cache` (a cached index of `standin`), and
 * `blend` (private + standin-cache, uploads to private).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClientText, DiscoveryDocument } from '../../registry/src/discovery/types.js';
import { CLEAN_ENV, freshPipVenv, PROJECT_ENV } from '../python/fixtures/clients.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { cached, hosted, toml, virtual } from '../support/config.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { freePort, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { backendWheels } from './fixtures/backend.js';

const TOKEN = 'discovery-python-token-5d1c';
let server: Velodex;
let alpha: BuiltProject;

async function texts(route: string): Promise<Record<string, ClientText>> {
  const doc = (await (await fetch(`${server.url}/${route}/+api`)).json()) as DiscoveryDocument;
  const texts = doc.indexes[0]?.client_configuration;
  if (!texts) throw new Error(`no client texts for ${route}`);
  return texts;
}

/** The environment every uv run gets: the machine's PyPI replaced by the stand-in. */
function uvEnv(): Record<string, string> {
  return { ...PROJECT_ENV, UV_PYTHON: tool('python'), UV_DEFAULT_INDEX: `${server.url}/root/standin/simple/` };
}

/** A uv project: `pyproject.toml` text of its own plus the pasted index text. */
function project(body: string, pasted: string): string {
  const dir = tempDir('velodex-uvproj-');
  writeFileSync(join(dir, 'pyproject.toml'), `${body}\n${pasted}`);
  return dir;
}

const APP = `[project]
name = "app"
version = "0.1.0"
requires-python = ">=3.8"
dependencies = ["alpha"]
`;

/** A package whose build backend (hatchling) must come from an index. */
const PACKAGE = `[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "gamma"
version = "0.1.0"
requires-python = ">=3.8"

[tool.hatch.build.targets.wheel]
packages = ["gamma"]
`;

function packageDir(pasted: string): string {
  const dir = project(PACKAGE, pasted);
  writeFileSync(join(dir, 'README.md'), 'gamma\n');
  return dir;
}

const wheels = (dir: string) => readdirSync(join(dir, 'dist')).filter((f) => f.endsWith('.whl'));

beforeAll(async () => {
  const port = await freePort();
  const [built, backend] = await Promise.all([buildProject('alpha', '1.0.0'), backendWheels()]);
  alpha = built;
  server = await startVelodex({
    port,
    config: toml(
      hosted('private', { token: TOKEN }),
      hosted('standin', { token: TOKEN }),
      cached('standin-cache', `http://127.0.0.1:${port}/root/standin/simple/`),
      virtual('blend', ['private', 'standin-cache'], { uploadTarget: 'private' }),
    ),
  });
  await run(tool('twine'), ['upload', '--non-interactive', '--disable-progress-bar', '--repository-url', `${server.url}/root/standin/`, '-u', '__token__', '-p', TOKEN, ...backend], {
    env: CLEAN_ENV,
  });
});

afterAll(async () => {
  await server?.stop();
});

describe('texts from /root/private/+api', () => {
  it('twine uploads with the returned .pypirc', async () => {
    const pypirc = (await texts('root/private')).pypirc;
    expect(pypirc?.text).toContain('<upload-token>');
    const file = join(tempDir('velodex-pypirc-'), '.pypirc');
    writeFileSync(file, (pypirc?.text ?? '').replace('<upload-token>', TOKEN));
    await run(tool('twine'), ['upload', '--non-interactive', '--disable-progress-bar', '--config-file', file, '-r', 'private', alpha.wheel, alpha.sdist], { env: CLEAN_ENV });
    const page = await fetch(`${server.url}/root/private/simple/alpha/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
    expect(((await page.json()) as { versions: string[] }).versions).toEqual(['1.0.0']);
  });

  it('pip installs with the returned pip.conf', async () => {
    const conf = join(tempDir('velodex-pipconf-'), 'pip.conf');
    writeFileSync(conf, (await texts('root/private')).pip?.text ?? '');
    const venv = await freshPipVenv();
    await run(join(venv, 'bin', 'pip'), ['install', '--no-cache-dir', 'alpha'], { env: { ...PROJECT_ENV, PIP_CONFIG_FILE: conf } });
    const res = await run(join(venv, 'bin', 'python'), ['-c', 'import alpha; print(alpha.hello())']);
    expect(res.stdout.trim()).toBe('alpha 1.0.0');
  });

  it('uv locks and syncs from velodex with the returned [[tool.uv.index]]', async () => {
    const dir = project(APP, (await texts('root/private')).uv?.text ?? '');
    await run(tool('uv'), ['sync'], { cwd: dir, env: uvEnv() });
    // The lock names velodex as alpha's source: the pasted index, not the default, served it.
    expect(readFileSync(join(dir, 'uv.lock'), 'utf8')).toContain(`source = { registry = "${server.url}/root/private/simple/" }`);
    const res = await run(tool('uv'), ['run', 'python', '-c', 'import alpha; print(alpha.hello())'], { cwd: dir, env: uvEnv() });
    expect(res.stdout.trim()).toBe('alpha 1.0.0');
  });

  it('uv build still finds its build backend with the returned text in place', async () => {
    const dir = packageDir((await texts('root/private')).uv?.text ?? '');
    await run(tool('uv'), ['build', '--wheel'], { cwd: dir, env: uvEnv() });
    expect(wheels(dir)).toEqual(['gamma-0.1.0-py3-none-any.whl']);
  });

  it('(control) the old recipe, the hosted index as default = true, breaks uv build', async () => {
    const dir = packageDir(`${(await texts('root/private')).uv?.text ?? ''}default = true\n`);
    // No stand-in: UV_DEFAULT_INDEX would override the pasted default, and PyPI is never asked
    // anyway once the pasted index is the default.
    const res = await run(tool('uv'), ['build', '--wheel'], { cwd: dir, env: { ...PROJECT_ENV, UV_PYTHON: tool('python') }, allowFailure: true });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/hatchling/);
  });
});

describe('texts from /root/blend/+api (an index with an upstream)', () => {
  /** No stand-in this time: the text makes the blend the default index, so PyPI is never asked. */
  const blendEnv = () => ({ ...PROJECT_ENV, UV_PYTHON: tool('python') });

  it('makes velodex the default index, and uv sync and uv build work through it alone', async () => {
    const uv = (await texts('root/blend')).uv?.text ?? '';
    expect(uv).toContain('default = true');
    const app = project(APP, uv);
    await run(tool('uv'), ['sync'], { cwd: app, env: blendEnv() });
    expect(readFileSync(join(app, 'uv.lock'), 'utf8')).toContain(`source = { registry = "${server.url}/root/blend/simple/" }`);
    const res = await run(tool('uv'), ['run', 'python', '-c', 'import alpha; print(alpha.hello())'], { cwd: app, env: blendEnv() });
    expect(res.stdout.trim()).toBe('alpha 1.0.0');

    const pkg = packageDir(uv);
    await run(tool('uv'), ['build', '--wheel'], { cwd: pkg, env: blendEnv() });
    expect(wheels(pkg)).toEqual(['gamma-0.1.0-py3-none-any.whl']);
  });
});
