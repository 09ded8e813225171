/**
 * The direction of registry/src (docs/development.md, "Layers"): no folder cycle, read by the same
 * code as `npm run imports` (hack/imports/), and the lint rules that keep each folder to the layers
 * below it, fed deliberately wrong imports through ESLint's own API with the repository's config.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';
import { cyclePath, fileImports, folderCycles, folderGraph } from '../../hack/imports/graph.js';
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
    ['app/probe.ts', '../python/index.js'],
    ['app/observe/probe.ts', '../ui/routes.js'],
    ['python/read/probe.ts', '../../roles/upstream.js'],
    ['oci/probe.ts', '../ecosystem/ecosystem.js'],
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
