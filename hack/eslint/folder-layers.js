/**
 * An ESLint rule that keeps a source tree's folders in layers: a file in one top-level folder of
 * the tree may import a file of another folder only when that folder is in a lower layer, or in
 * its own layer when the layer lets siblings import each other. Files at the top of the tree (the
 * `cli.ts` entry) are above every layer: nothing in a layer imports them, and they are not checked.
 *
 * Imports are resolved as paths, so `../../app/x.js` from a nested file is judged by the folder it
 * lands in, not by how it is spelled. Only relative imports are checked (packages are outside the
 * tree). A folder that is in no layer is reported too, so a new folder gets a place in the table.
 *
 * Options: `{ name, root, doc, layers }`; `layers` is ordered top to bottom, each
 * `{ what, folders, siblings? }`. eslint.config.js builds the core's table (`coreLayerRules`).
 */
import { dirname, extname, isAbsolute, relative, resolve, sep } from 'node:path';

/** @typedef {{ what: string, folders: string[], siblings?: boolean }} Layer */
/** @typedef {{ name: string, root: string, doc: string, layers: Layer[] }} Options */

/** @type {import('eslint').Rule.RuleModule} */
export const folderLayers = {
  meta: {
    type: 'problem',
    docs: { description: 'a folder imports only from folders of lower layers' },
    schema: [
      {
        type: 'object',
        properties: {
          name: { type: 'string' },
          root: { type: 'string' },
          doc: { type: 'string' },
          layers: { type: 'array', items: { type: 'object' } },
        },
        required: ['name', 'root', 'doc', 'layers'],
        additionalProperties: false,
      },
    ],
    messages: {
      higher: '{{name}}: {{from}}/ ({{fromWhat}}) must not import {{to}}/ ({{toWhat}}), a higher layer ({{doc}}).',
      sibling: '{{name}}: {{from}}/ and {{to}}/ are both {{fromWhat}} and must not import each other ({{doc}}).',
      entry: '{{name}}: {{to}} is an entry point above every layer; nothing imports it ({{doc}}).',
      unplaced: '{{name}}: {{folder}}/ is in no layer; give it its place in the table of eslint.config.js ({{doc}}).',
    },
  },

  create(context) {
    const /** @type {Options} */ options = context.options[0];
    const root = resolve(context.cwd, options.root);
    const from = placeOf(root, context.filename);
    // Outside the tree, or an entry point at its top: not this rule's business.
    if (from === null || from.entry) return {};
    const layerOf = new Map(options.layers.flatMap((layer, rank) => layer.folders.map((folder) => [folder, { ...layer, rank }])));
    const fromLayer = layerOf.get(from.folder);
    const facts = { name: options.name, doc: options.doc };

    /** @param {import('estree').Node} node @param {unknown} specifier */
    const check = (node, specifier) => {
      if (typeof specifier !== 'string' || !specifier.startsWith('.')) return;
      const to = placeOf(root, resolve(dirname(context.filename), specifier));
      if (to === null || to.folder === from.folder) return;
      if (to.entry) return context.report({ node, messageId: 'entry', data: { ...facts, to: to.folder } });
      if (!fromLayer) return context.report({ node, messageId: 'unplaced', data: { ...facts, folder: from.folder } });
      const toLayer = layerOf.get(to.folder);
      if (!toLayer) return context.report({ node, messageId: 'unplaced', data: { ...facts, folder: to.folder } });
      const data = { ...facts, from: from.folder, to: to.folder, fromWhat: fromLayer.what, toWhat: toLayer.what };
      if (toLayer.rank < fromLayer.rank) return context.report({ node, messageId: 'higher', data });
      if (toLayer.rank === fromLayer.rank && !fromLayer.siblings) return context.report({ node, messageId: 'sibling', data });
    };

    /** @param {{ source?: import('estree').Node | null }} node */
    const checkSource = (node) => {
      if (node.source?.type === 'Literal') check(node.source, node.source.value);
    };
    return {
      ImportDeclaration: checkSource,
      ExportNamedDeclaration: checkSource,
      ExportAllDeclaration: checkSource,
      ImportExpression: checkSource,
      // `import('../x.js').T` in a type (typescript-eslint's node; its `source` is the literal).
      TSImportType: checkSource,
    };
  },
};

/**
 * Where `path` sits in the tree at `root`: its top-level folder, or the entry point it is (a
 * file at the top, named without its extension's `.js`/`.ts` difference), or null outside.
 * @param {string} root @param {string} path
 * @returns {{ folder: string, entry: boolean } | null}
 */
function placeOf(root, path) {
  const rel = relative(root, path);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return null;
  const parts = rel.split(sep);
  if (parts.length > 1) return { folder: parts[0], entry: false };
  const file = parts[0];
  return { folder: file.slice(0, file.length - extname(file).length), entry: true };
}
