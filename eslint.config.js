import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { folderLayers } from './hack/eslint/folder-layers.js';

/**
 * The layers of registry/src, top to bottom (docs/development.md, "Layers"): a folder imports
 * only from folders of lower layers; inside a layer marked `siblings`, its folders may import
 * each other (the cycle test, test/architecture/layers.test.ts, keeps them from doing it both ways).
 * A new folder gets its line here.
 */
const CORE_LAYERS = [
  { what: 'the composition root', folders: ['app'] },
  { what: 'an ecosystem', folders: ['python', 'oci'] },
  { what: 'the ecosystem seam', folders: ['ecosystem'] },
  { what: 'a neutral service', folders: ['access', 'roles', 'limits', 'policy', 'archive', 'events', 'discovery', 'workers', 'lifecycle', 'tls', 'search'], siblings: true },
  { what: 'the instruments', folders: ['observe'] },
  { what: 'the HTTP helpers', folders: ['http'] },
  { what: 'storage', folders: ['storage'] },
  { what: 'config', folders: ['config'] },
  { what: 'the neutral error kinds', folders: ['errors'] },
];

/**
 * Our own rules (hack/eslint/). Each table of layers is its own rule id: flat config replaces a
 * rule's options for a file that two config objects match, so the core's table and an
 * ecosystem's (`no-restricted-imports` in ecosystemLayerRules) must not share a rule.
 */
const velodex = { rules: { 'core-layers': folderLayers } };

export default tseslint.config(
  { ignores: ['**/dist/**', '.tools/**', 'node_modules/**', '**/*.js', '**/*.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  // The core's layers (docs/development.md): the composition root on top, config and the error kinds at the bottom;
  // a folder imports only from the layers below it.
  ...coreLayerRules(),
  // The layers inside each ecosystem (docs/development.md): handlers on top, read below them,
  // model at the bottom; a lower layer never imports a higher one, so a request walks down and
  // back up once.
  ...pythonLayerRules(),
  ...ociLayerRules(),
  // Errors are told apart by class and kind (docs/development.md, "Errors"), never by name.
  ...errorNameRules(),
);

/**
 * `no-restricted-syntax` over registry/src: comparing an error's `name` with a class name
 * (`err.name === 'UpstreamError'`) is refused; test the class (`instanceof`) and its `kind`.
 * A platform error that has no class of its own is asked about another way (events/send.ts asks
 * its deadline signal).
 */
function errorNameRules() {
  const message = 'Tell errors apart by class and kind, not by name (docs/development.md, "Errors").';
  const className = '/(Error|Failure|Exception)$/';
  return [
    {
      files: ['registry/src/**/*.ts'],
      rules: {
        'no-restricted-syntax': [
          'error',
          { selector: `BinaryExpression[left.property.name='name'][right.value=${className}]`, message },
          { selector: `BinaryExpression[right.property.name='name'][left.value=${className}]`, message },
        ],
      },
    },
  ];
}

/** `velodex/core-layers` over registry/src, from the one ordered table `CORE_LAYERS`. */
function coreLayerRules() {
  return [
    {
      files: ['registry/src/**/*.ts'],
      plugins: { velodex },
      rules: {
        'velodex/core-layers': ['error', { name: 'core layers', root: 'registry/src', doc: 'docs/development.md, "Layers"', layers: CORE_LAYERS }],
      },
    },
  ];
}

/** The Python layers: `python/handlers/` over `python/read/` over `python/model/`. */
function pythonLayerRules() {
  return ecosystemLayerRules('python');
}

/**
 * The OCI layers: `oci/lifecycle/` (runs without a request: retention, which deletes through
 * the handlers' removal path) over `oci/handlers/` over `oci/read/` over `oci/model/`.
 */
function ociLayerRules() {
  return ecosystemLayerRules('oci', ['lifecycle', 'handlers', 'read', 'model']);
}

/**
 * `no-restricted-imports` per layer of one ecosystem's folder, `layers` listed top to bottom: what
 * each layer may not import (relative specifiers naming a higher layer's folder, or the
 * ecosystem's entry `<ecosystem>/index.ts`, which composes them all). Each ecosystem's files are
 * its own, so the ecosystems' rules never meet on one file.
 */
function ecosystemLayerRules(ecosystem, layers = ['handlers', 'read', 'model']) {
  const entry = { regex: '^(\\.\\./)+index\\.js$', message: `${ecosystem}/index.ts is the top: nothing under ${ecosystem}/ imports it.` };
  return layers.map((files, i) => ({
    files: [`registry/src/${ecosystem}/${files}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            entry,
            ...layers.slice(0, i).map((folder) => ({
              regex: `^\\.\\.?/(\\.\\./)*(${ecosystem}/)?${folder}/`,
              message: `${ecosystem}/${files}/ is below ${ecosystem}/${folder}/ and must not import it (docs/development.md, "Layers").`,
            })),
          ],
        },
      ],
    },
  }));
}
