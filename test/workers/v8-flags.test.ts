/**
 * The V8 flags a serving process starts with (registry/src/workers/v8-flags.ts): what a primary
 * gives its workers, and what the image's command line carries. That a real worker runs with them
 * is checked in workers.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { SERVING_V8_FLAGS, workerExecArgv } from '../../registry/src/workers/v8-flags.js';
import { REPO } from '../support/paths.js';

it('turns the memory reducer off', () => {
  expect(SERVING_V8_FLAGS).toEqual(['--no-memory-reducer']);
});

it("adds the flags to the primary's own, once", () => {
  expect(workerExecArgv(['--import', 'tsx'])).toEqual(['--import', 'tsx', '--no-memory-reducer']);
  expect(workerExecArgv(['--no-memory-reducer', '--trace-gc'])).toEqual(['--no-memory-reducer', '--trace-gc']);
});

it("is on the image's command line", () => {
  const dockerfile = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
  expect(dockerfile).toContain(`ENTRYPOINT ["node", ${SERVING_V8_FLAGS.map((f) => JSON.stringify(f)).join(', ')}, "/app/registry/dist/cli.js"]\n`);
});
