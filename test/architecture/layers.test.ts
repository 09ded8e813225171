/**
 * The direction of registry/src (docs/development.md, "Layers"): no folder cycle, and inside each
 * ecosystem no cycle between its folders at any level nor between its files, read by the same code
 * as `npm run imports` (hack/imports/), and the lint rules that keep each folder to the layers
 * below it, fed deliberately wrong imports through ESLint's own API with the repository's config.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';
import { cyclePath, cyclesInside, fileGraph, fileImports, folderCycles, folderGraph, importsUnder } from '../../hack/imports/graph.js';
import { REPO } from '../support/paths.js';
import { run } from '../support/run.js';
import { tempDir } from '../support/temp-dirs.js';

const SOURCE_ROOT = join(REPO, 'registry', 'src');

describe('the folder import graph', () => {
  it('has no cycle in registry/src', () => {
    const graph = folderGraph(fileImports(SOURCE_ROOT));
    const cycles = folderCycles(graph).map((cycle) => ({ cycle, through: cyclePath(graph, cycle).map(({ from, to }) => `${from} -> ${to}`) }));
    expect(cycles).toEqual([]);
    // The graph is read at all: the composition root imports the ecosystems and the storage.
    expect([...(graph.get('app')?.keys() ?? [])]).toEqual(expect.arrayContaining(['python', 'oci', 'storage', 'config']));
  });

  it.each(['python', 'oci'])('has no cycle inside %s/, between its folders at any level or between its files', (ecosystem) => {
    const imports = fileImports(SOURCE_ROOT);
    const under = importsUnder(imports, ecosystem);
    const nested = cyclesInside(imports, ecosystem).map(({ folder, cycle }) => `${folder}: ${cycle.join(', ')}`);
    expect(nested).toEqual([]);
    expect(folderCycles(fileGraph(under))).toEqual([]);
    // The ecosystem's graph is read at all: its handlers walk down to read/ and model/.
    expect([...(folderGraph(under).get('handlers')?.keys() ?? [])]).toEqual(expect.arrayContaining(['read', 'model']));
  });

  it('finds a cycle, and `npm run imports` prints it and fails', async () => {
    const root = tempDir('velodex-imports-');
    const write = (file: string, text: string) => {
      mkdirSync(dirname(join(root, file)), { recursive: true });
      writeFileSync(join(root, file), text);
    };
    write('low/a.ts', "import type { C } from '../top/c.js';\nexport type A = C;\n");
    write('mid/b.ts', "import type { A } from '../low/a.js';\nexport type B = A;\n");
    // A type-only import of a file under a nested folder still makes the edge.
    write('top/nested/c.ts', "export type C = number;\nexport type D = import('../../mid/b.js').B;\n");
    write('top/c.ts', "export type { C } from './nested/c.js';\n");
    write('alone.ts', "import type { A } from './low/a.js';\nexport type E = A;\n");

    const graph = folderGraph(fileImports(root));
    expect(folderCycles(graph)).toEqual([['low', 'mid', 'top']]);
    expect(cyclePath(graph, ['low', 'mid', 'top']).map(({ from, to }) => `${from} -> ${to}`)).toEqual([
      'low/a.ts -> top/c.ts',
      'top/nested/c.ts -> mid/b.ts',
      'mid/b.ts -> low/a.ts',
    ]);

    const res = await run('npm', ['run', '--silent', 'imports', '--', root], { cwd: REPO, allowFailure: true });
    expect(res.code).toBe(1);
    expect(res.stdout).toContain('alone.ts -> low (1)');
    expect(res.stdout).toContain('cycle: low, mid, top');
    const clean = await run('npm', ['run', '--silent', 'imports'], { cwd: REPO });
    expect(clean.stdout).toContain('no folder cycles');
    expect(clean.stdout).toContain('no cycles in oci/: none between its folders at any level, none between its files');
    expect(clean.stdout).toContain('no cycles in python/');
  });

  it('finds the cycles inside a layered folder that its folder graph cannot see', async () => {
    const root = tempDir('velodex-imports-inside-');
    const write = (file: string, text: string) => {
      mkdirSync(dirname(join(root, file)), { recursive: true });
      writeFileSync(join(root, file), text);
    };
    // Two files of one folder that import each other (the shape of oci/'s old 8-file cycle): no edge at folder level.
    write('eco/read/a.ts', "import type { B } from './b.js';\nexport type A = B | 1;\n");
    write('eco/read/b.ts', "export type B = import('./a.js').A extends 1 ? 2 : 3;\n");
    // Two sub-folders of read/ that import each other through different files: a cycle one level
    // further down that no two files make.
    write('eco/read/x/p.ts', "import type { Q } from '../y/q.js';\nexport type P = Q;\n");
    write('eco/read/x/s.ts', 'export type S = string;\n');
    write('eco/read/y/q.ts', 'export type Q = number;\n');
    write('eco/read/y/r.ts', "export type R = import('../x/s.js').S;\n");
    write('eco/handlers/h.ts', "import type { A } from '../read/a.js';\nexport type H = A;\n");

    const imports = fileImports(root);
    expect(folderCycles(folderGraph(imports))).toEqual([]);
    // Each level's files are nodes of its graph beside its folders.
    expect(cyclesInside(imports, 'eco').map(({ folder, cycle }) => ({ folder, cycle }))).toEqual([
      { folder: 'eco/read', cycle: ['a.ts', 'b.ts'] },
      { folder: 'eco/read', cycle: ['x', 'y'] },
    ]);
    const files = fileGraph(importsUnder(imports, 'eco'));
    expect(folderCycles(files)).toEqual([['read/a.ts', 'read/b.ts']]);
    expect(cyclePath(files, ['read/a.ts', 'read/b.ts'], (file) => file).map(({ from, to }) => `${from} -> ${to}`)).toEqual([
      'read/a.ts -> read/b.ts',
      'read/b.ts -> read/a.ts',
    ]);

    const res = await run('npm', ['run', '--silent', 'imports', '--', root, '--inside', 'eco'], { cwd: REPO, allowFailure: true });
    expect(res.code).toBe(1);
    expect(res.stdout).toContain('no folder cycles');
    expect(res.stdout).toContain('cycle in eco/read/: a.ts, b.ts');
    expect(res.stdout).toContain('cycle in eco/read/: x, y');
    expect(res.stdout).toContain('file cycle in eco/: read/a.ts, read/b.ts');
  });
});

describe('the layer rules of eslint.config.js', () => {
  let eslint: ESLint;
  beforeAll(() => {
    eslint = new ESLint({ cwd: REPO });
  });

  /** The rule ids and messages ESLint reports for `text` as the file `file` (relative to registry/src). */
  async function layerProblems(file: string, text: string): Promise<{ ruleId: string | null; message: string }[]> {
    const [result] = await eslint.lintText(text, { filePath: join(SOURCE_ROOT, file) });
    return (result?.messages ?? [])
      .filter((m) => m.ruleId === 'velodex/core-layers' || m.ruleId === 'no-restricted-imports' || m.fatal)
      .map(({ ruleId, message }) => ({ ruleId, message }));
  }

  const importing = (specifier: string) => `import * as probe from '${specifier}';\nexport const used = probe;\n`;

  it.each([
    ['storage/probe.ts', '../app/app.js', 'storage/ (storage) must not import app/ (the composition root)'],
    ['storage/s3/probe.ts', '../../app/app.js', 'storage/ (storage) must not import app/'],
    ['config/probe.ts', '../roles/egress.js', 'config/ (config) must not import roles/ (a neutral service)'],
    ['http/probe.ts', '../limits/slots.js', 'http/ (the HTTP helpers) must not import limits/'],
    ['python/probe.ts', '../oci/names.js', 'python/ and oci/ are both an ecosystem and must not import each other'],
    ['oci/probe.ts', '../python/model/pep440.js', 'oci/ and python/ are both an ecosystem'],
    ['ecosystem/probe.ts', '../python/index.js', 'ecosystem/ (the ecosystem seam) must not import python/'],
    ['roles/probe.ts', '../app/ecosystems.js', 'roles/ (a neutral service) must not import app/'],
    ['observe/probe.ts', '../roles/upstream.js', 'observe/ (the instruments) must not import roles/'],
    ['observe/probe.ts', '../cli.js', 'cli is an entry point above every layer'],
    ['newfolder/probe.ts', '../config/types.js', 'newfolder/ is in no layer'],
  ])('reports %s importing %s', async (file, specifier, says) => {
    const problems = await layerProblems(file, importing(specifier));
    expect(problems).toHaveLength(1);
    expect(problems[0]?.ruleId).toBe('velodex/core-layers');
    expect(problems[0]?.message).toContain(says);
    expect(problems[0]?.message).toMatch(/^core layers: .*docs\/development\.md, "Layers"/);
  });

  it('reports a dynamic import and a type-only import the same way', async () => {
    const problems = await layerProblems('storage/probe.ts', "export const later = () => import('../app/app.js');\nexport type T = import('../app/app.js').BuiltApp;\n");
    expect(problems.map((p) => p.ruleId)).toEqual(['velodex/core-layers', 'velodex/core-layers']);
  });

  it('keeps the Python layers beside the core layers', async () => {
    const problems = await layerProblems('python/model/probe.ts', importing('../handlers/routes.js'));
    expect(problems).toEqual([{ ruleId: 'no-restricted-imports', message: expect.stringContaining('python/model/ is below python/handlers/') }]);
    // A file the Python rule covers still has the core's rule.
    const both = await layerProblems('python/model/probe.ts', importing('../../app/app.js'));
    expect(both.map((p) => p.ruleId)).toEqual(['velodex/core-layers']);
  });

  it.each([
    ['oci/model/probe.ts', '../read/index-holds.js', 'oci/model/ is below oci/read/'],
    ['oci/model/probe.ts', '../handlers/routes.js', 'oci/model/ is below oci/handlers/'],
    ['oci/read/probe.ts', '../handlers/deps.js', 'oci/read/ is below oci/handlers/'],
    ['oci/read/cached/probe.ts', '../../handlers/blobs.js', 'oci/read/ is below oci/handlers/'],
    ['oci/read/virtual/probe.ts', '../../index.js', 'oci/index.ts is the top'],
  ])('keeps the OCI layers: reports %s importing %s', async (file, specifier, says) => {
    const problems = await layerProblems(file, importing(specifier));
    expect(problems).toEqual([{ ruleId: 'no-restricted-imports', message: expect.stringContaining(says) }]);
  });

  it.each([
    ['app/probe.ts', '../python/index.js'],
    ['app/observe/probe.ts', '../ui/routes.js'],
    ['python/read/probe.ts', '../../roles/upstream.js'],
    ['oci/probe.ts', '../ecosystem/ecosystem.js'],
    ['oci/handlers/probe.ts', '../read/virtual/members.js'],
    ['oci/read/cached/probe.ts', '../../model/errors.js'],
    ['oci/read/cached/probe.ts', '../hosted/repos.js'],
    ['roles/probe.ts', '../limits/slots.js'],
    ['access/probe.ts', '../observe/security-log.js'],
    ['http/probe.ts', '../config/types.js'],
    ['storage/probe.ts', '../config/types.js'],
    ['storage/s3/probe.ts', '../fs/stage.js'],
    ['config/probe.ts', './types.js'],
    ['cli.ts', './app/server.js'],
  ])('accepts %s importing %s', async (file, specifier) => {
    expect(await layerProblems(file, importing(specifier))).toEqual([]);
  });
});
