/**
 * A real, large wheel for the download scenarios: a pure-Python project `bigwheel` whose package
 * carries an incompressible data file, built with `python -m build --wheel` (hatchling, as the
 * projects of test/python/fixtures/projects.ts are), so the wheel is about as big as the file.
 */
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pseudoRandom } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';

export interface BigWheel {
  path: string;
  filename: string;
  size: number;
}

export async function buildBigWheel(work: string, payloadBytes: number): Promise<BigWheel> {
  const src = join(work, 'bigwheel-src');
  const out = join(work, 'bigwheel-dist');
  mkdirSync(join(src, 'src', 'bigwheel'), { recursive: true });
  writeFileSync(
    join(src, 'pyproject.toml'),
    `[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "bigwheel"
version = "1.0"
description = "velodex bench: a wheel of ${payloadBytes} bytes of data"
requires-python = ">=3.8"

[tool.hatch.build.targets.wheel]
packages = ["src/bigwheel"]
`,
  );
  writeFileSync(join(src, 'src', 'bigwheel', '__init__.py'), '"""velodex bench payload."""\n');
  writeFileSync(join(src, 'src', 'bigwheel', 'payload.bin'), pseudoRandom('velodex-bench-bigwheel', payloadBytes));
  await run(tool('python'), ['-m', 'build', '--wheel', '--no-isolation', '--outdir', out, src], { env: { SOURCE_DATE_EPOCH: '1700000000' } });
  const filename = readdirSync(out).find((f) => f.endsWith('.whl'));
  if (!filename) throw new Error(`building bigwheel produced no wheel in ${out}`);
  const path = join(out, filename);
  const size = statSync(path).size;
  if (size < payloadBytes) throw new Error(`bigwheel is ${size} bytes, expected at least ${payloadBytes}: the payload was left out`);
  return { path, filename, size };
}
