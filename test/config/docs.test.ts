/** The configuration a user copies from the docs must be one velodex accepts. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../support/temp-dirs.js';
import { expect, it } from 'vitest';
import { CLI, REPO } from '../support/paths.js';
import { run } from '../support/run.js';

it('accepts the complete example of docs/configuration.md', async () => {
  const doc = readFileSync(join(REPO, 'docs', 'configuration.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## A complete example'));
  const toml = /```toml\n([\s\S]*?)```/.exec(section)?.[1];
  expect(toml).toBeDefined();
  const dir = tempDir('velodex-docs-');
  writeFileSync(join(dir, 'token'), 'a-token\n');
  const path = join(dir, 'velodex.toml');
  writeFileSync(path, (toml ?? '').replaceAll('/run/secrets/hosted/token', join(dir, 'token')));
  const res = await run(process.execPath, [CLI, 'check-config', path]);
  expect(res.stdout).toContain('index hosted: /root/hosted/ python hosted');
  expect(res.stdout).toContain('index images: /root/images/ oci hosted');
  expect(res.stdout).toContain('index pypi: /root/pypi/ python cached');
});
