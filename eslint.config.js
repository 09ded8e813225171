import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
  // The Python layers (docs/development.md): handlers on top, read below them, model at the
  // bottom; a lower layer never imports a higher one, so a request walks down and back up once.
  ...pythonLayerRules(),
);

/**
 * `no-restricted-imports` per Python layer: what each layer may not import (relative specifiers
 * naming a higher layer's folder, or the ecosystem entry `python/index.ts`).
 */
function pythonLayerRules() {
  const entry = { regex: '^(\\.\\./)+index\\.js$', message: 'python/index.ts is the top: nothing under python/ imports it.' };
  const layer = (files, higher) => ({
    files: [`registry/src/python/${files}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            entry,
            ...higher.map((folder) => ({
              regex: `^\\.\\.?/(\\.\\./)*(python/)?${folder}/`,
              message: `python/${files}/ is below python/${folder}/ and must not import it (docs/development.md, "Layers").`,
            })),
          ],
        },
      ],
    },
  });
  return [layer('model', ['read', 'handlers']), layer('read', ['handlers']), layer('handlers', [])];
}
