/**
 * The folder-level import graph of a source tree (registry/src): which folder imports which, read
 * with the TypeScript compiler's own import scanner (`ts.preProcessFile`, type-only and dynamic
 * imports included) and resolved as the compiler resolves them (`ts.resolveModuleName`, NodeNext).
 * Only relative imports count: packages are outside the tree.
 *
 * A node is a top-level folder of the tree (`app`, `storage`, ...); a file at the top of the tree
 * (`cli.ts`) is a node of its own. `npm run imports` prints the graph (hack/imports/main.ts);
 * test/architecture/layers.test.ts fails on a cycle with the same code.
 *
 * A folder cut in layers of its own (an ecosystem: `oci/`, `python/`) is read the same way one
 * level down (`importsUnder`): no cycle between the folders of any level inside it
 * (`cyclesInside`), and none between its files (`fileGraph`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import ts from 'typescript';

/** One file's import of another, both relative to the tree's root, with `/` separators. */
export interface FileImport {
  from: string;
  to: string;
}

/** Folder to the folders it imports, each with the file imports behind the edge. */
export type FolderGraph = ReadonlyMap<string, ReadonlyMap<string, readonly FileImport[]>>;

const COMPILER_OPTIONS: ts.CompilerOptions = { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext };

/** Every `.ts`/`.tsx` source under `root` (declaration files left out), relative to `root`. */
export function sourceFiles(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts'))
    .map((entry) => toSlashes(relative(root, join(entry.parentPath, entry.name))))
    .sort();
}

/** The relative imports of every source file under `root` that resolve to a file under `root`. */
export function fileImports(root: string): FileImport[] {
  const imports: FileImport[] = [];
  for (const file of sourceFiles(root)) {
    const path = join(root, file);
    const { importedFiles } = ts.preProcessFile(readFileSync(path, 'utf8'), true, true);
    for (const { fileName: specifier } of importedFiles) {
      if (!specifier.startsWith('./') && !specifier.startsWith('../')) continue;
      const resolved = ts.resolveModuleName(specifier, path, COMPILER_OPTIONS, ts.sys).resolvedModule?.resolvedFileName;
      if (!resolved) throw new Error(`${file}: cannot resolve "${specifier}"`);
      const to = toSlashes(relative(root, resolved));
      if (!to.startsWith('../')) imports.push({ from: file, to });
    }
  }
  return imports;
}

/** The node a file belongs to: its top-level folder, or the file itself at the top of the tree. */
export function folderOf(file: string): string {
  const slash = file.indexOf('/');
  return slash < 0 ? file : file.slice(0, slash);
}

/** The node a file belongs to in a graph: its top-level folder (`folderOf`), or the file itself (`fileGraph`). */
export type NodeOf = (file: string) => string;

/** Imports inside one folder are not edges; every other import is one, kept with its files. */
export function folderGraph(imports: readonly FileImport[], nodeOf: NodeOf = folderOf): FolderGraph {
  const graph = new Map<string, Map<string, FileImport[]>>();
  for (const edge of imports) {
    const from = nodeOf(edge.from);
    const to = nodeOf(edge.to);
    const targets = graph.get(from) ?? new Map<string, FileImport[]>();
    graph.set(from, targets);
    if (from === to) continue;
    const files = targets.get(to) ?? [];
    targets.set(to, files);
    files.push(edge);
  }
  return graph;
}

/**
 * The folder cycles: every strongly connected component of more than one folder (Tarjan), each
 * sorted by name, the list sorted by its first member. Empty when the folders form a hierarchy.
 */
export function folderCycles(graph: FolderGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let next = 0;

  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next += 1;
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node)?.keys() ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node)!, index.get(target)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) cycles.push(component.sort());
  };

  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return cycles.sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
}

/** Every file a node of its own: a cycle here is a cycle between files. */
export function fileGraph(imports: readonly FileImport[]): FolderGraph {
  return folderGraph(imports, (file) => file);
}

/**
 * The imports between files under `folder` (a path in the tree, `/`-separated), with both paths
 * relative to it: the tree one level down, for `folderGraph` and `fileGraph`.
 */
export function importsUnder(imports: readonly FileImport[], folder: string): FileImport[] {
  const prefix = `${folder}/`;
  return imports
    .filter(({ from, to }) => from.startsWith(prefix) && to.startsWith(prefix))
    .map(({ from, to }) => ({ from: from.slice(prefix.length), to: to.slice(prefix.length) }));
}

/** A folder cycle between the folders (and top files) of one folder of the tree. */
export interface NestedCycle {
  /** The folder whose children form the cycle, `/`-separated from the tree's root. */
  folder: string;
  cycle: string[];
  /** One path of file imports around it, relative to `folder`. */
  through: FileImport[];
}

/**
 * The folder cycles at every level inside `folder`: for `folder` itself and each folder under it,
 * the cycles between its children (sub-folders and files), as `folderCycles` finds them one level
 * up. Empty when each level is a hierarchy.
 */
export function cyclesInside(imports: readonly FileImport[], folder: string): NestedCycle[] {
  const inside = importsUnder(imports, folder);
  const levels = new Set<string>(['']);
  for (const { from } of inside) {
    const parts = from.split('/').slice(0, -1);
    for (let i = 1; i <= parts.length; i += 1) levels.add(parts.slice(0, i).join('/'));
  }
  const found: NestedCycle[] = [];
  for (const level of [...levels].sort()) {
    const graph = folderGraph(level === '' ? inside : importsUnder(inside, level));
    for (const cycle of folderCycles(graph)) {
      const at = level === '' ? folder : `${folder}/${level}`;
      found.push({ folder: at, cycle, through: cyclePath(graph, cycle) });
    }
  }
  return found;
}

/** One path around a cycle, as file imports, for the report: `a -> b -> ... -> a`. */
export function cyclePath(graph: FolderGraph, cycle: readonly string[], nodeOf: NodeOf = folderOf): FileImport[] {
  const members = new Set(cycle);
  const start = cycle[0]!;
  // Breadth-first from `start` back to itself, inside the component.
  const cameFrom = new Map<string, FileImport>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const [target, files] of graph.get(node) ?? []) {
      if (!members.has(target) || cameFrom.has(target)) continue;
      cameFrom.set(target, files[0]!);
      if (target === start) return unwind(cameFrom, start, nodeOf);
      queue.push(target);
    }
  }
  return [];
}

function unwind(cameFrom: ReadonlyMap<string, FileImport>, start: string, nodeOf: NodeOf): FileImport[] {
  const path: FileImport[] = [];
  let node = start;
  do {
    const edge = cameFrom.get(node)!;
    path.unshift(edge);
    node = nodeOf(edge.from);
  } while (node !== start);
  return path;
}

function toSlashes(path: string): string {
  return sep === '/' ? path : path.split(sep).join('/');
}
