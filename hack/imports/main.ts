/**
 * `npm run imports`: prints the folder-level import graph of registry/src (each folder and the
 * folders it imports, with how many imports make each edge), then every folder cycle with one
 * path of file imports around it. Exits 1 when there is a cycle. `--files` lists the file imports
 * behind every edge too; a folder given as an argument is read instead of registry/src. The
 * layers these edges must follow are in docs/development.md.
 */
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cyclePath, fileImports, folderCycles, folderGraph } from './graph.js';

const SOURCE_ROOT = fileURLToPath(new URL('../../registry/src/', import.meta.url));

const args = process.argv.slice(2);
const withFiles = args.includes('--files');
const given = args.find((arg) => !arg.startsWith('--'));
const root = given === undefined ? SOURCE_ROOT : resolve(given);
const graph = folderGraph(fileImports(root));

console.log(`${relative(process.cwd(), root) || '.'}: folder -> folders it imports (file imports)`);
for (const folder of [...graph.keys()].sort()) {
  const targets = [...(graph.get(folder) ?? [])].sort(([a], [b]) => (a < b ? -1 : 1));
  console.log(`  ${folder} -> ${targets.map(([to, files]) => `${to} (${files.length})`).join(', ') || '(nothing)'}`);
  if (!withFiles) continue;
  for (const [, files] of targets) for (const { from, to } of files) console.log(`      ${from} -> ${to}`);
}

const cycles = folderCycles(graph);
if (cycles.length === 0) {
  console.log('no folder cycles');
} else {
  for (const cycle of cycles) {
    console.log(`cycle: ${cycle.join(', ')}`);
    for (const { from, to } of cyclePath(graph, cycle)) console.log(`  ${from} -> ${to}`);
  }
  process.exitCode = 1;
}
