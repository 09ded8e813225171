/**
 * `npm run imports`: prints the folder-level import graph of registry/src (each folder and the
 * folders it imports, with how many imports make each edge), then every folder cycle with one
 * path of file imports around it. Then the same inside each ecosystem (`oci/`, `python/`: the
 * folders cut in layers of their own): its graph one level down, and every cycle between its
 * folders at any level, or between its files. Exits 1 when there is a cycle. `--files` lists the
 * file imports behind every edge too; a folder given as an argument is read instead of
 * registry/src, with `--inside <folder>` (repeatable) naming the folders to read inside it. The
 * layers these edges must follow are in docs/development.md.
 */
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cyclePath, cyclesInside, fileGraph, fileImports, folderCycles, folderGraph, importsUnder, type FileImport, type FolderGraph } from './graph.js';

const SOURCE_ROOT = fileURLToPath(new URL('../../registry/src/', import.meta.url));
/** The ecosystems of registry/src (the ecosystems' line of CORE_LAYERS in eslint.config.js). */
const ECOSYSTEMS = ['python', 'oci'];

const args = process.argv.slice(2);
const withFiles = args.includes('--files');
const inside: string[] = [];
let given: string | undefined;
for (let i = 0; i < args.length; i += 1) {
  const arg = args[i]!;
  if (arg === '--inside') inside.push(args[(i += 1)] ?? '');
  else if (!arg.startsWith('--')) given = arg;
}
const root = given === undefined ? SOURCE_ROOT : resolve(given);
if (given === undefined) inside.push(...ECOSYSTEMS);
const imports = fileImports(root);
const shown = relative(process.cwd(), root) || '.';

function printGraph(title: string, graph: FolderGraph): void {
  console.log(`${title}: folder -> folders it imports (file imports)`);
  for (const folder of [...graph.keys()].sort()) {
    const targets = [...(graph.get(folder) ?? [])].sort(([a], [b]) => (a < b ? -1 : 1));
    console.log(`  ${folder} -> ${targets.map(([to, files]) => `${to} (${files.length})`).join(', ') || '(nothing)'}`);
    if (!withFiles) continue;
    for (const [, files] of targets) for (const { from, to } of files) console.log(`      ${from} -> ${to}`);
  }
}

function printPath(path: readonly FileImport[]): void {
  for (const { from, to } of path) console.log(`  ${from} -> ${to}`);
}

let cycles = 0;
const graph = folderGraph(imports);
printGraph(shown, graph);
const top = folderCycles(graph);
if (top.length === 0) console.log('no folder cycles');
for (const cycle of top) {
  console.log(`cycle: ${cycle.join(', ')}`);
  printPath(cyclePath(graph, cycle));
}
cycles += top.length;

for (const folder of inside) {
  const under = importsUnder(imports, folder);
  console.log('');
  printGraph(`${shown}/${folder}`, folderGraph(under));
  const nested = cyclesInside(imports, folder);
  for (const { folder: at, cycle, through } of nested) {
    console.log(`cycle in ${at}/: ${cycle.join(', ')}`);
    printPath(through);
  }
  const files = fileGraph(under);
  const fileCycles = folderCycles(files);
  for (const cycle of fileCycles) {
    console.log(`file cycle in ${folder}/: ${cycle.join(', ')}`);
    printPath(cyclePath(files, cycle, (file) => file));
  }
  if (nested.length + fileCycles.length === 0) console.log(`no cycles in ${folder}/: none between its folders at any level, none between its files`);
  cycles += nested.length + fileCycles.length;
}

if (cycles > 0) process.exitCode = 1;
