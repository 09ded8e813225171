/**
 * The C allocator's tunables a primary gives its workers, and the image's: the same setting, and
 * an operator's own GLIBC_TUNABLES left as they are.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { allocatorEnv, MALLOC_TUNABLES } from '../../registry/src/workers/allocator-env.js';
import { REPO } from '../support/paths.js';

it('gives a worker the trim threshold when the environment names no tunables', () => {
  expect(allocatorEnv({})).toEqual({ GLIBC_TUNABLES: MALLOC_TUNABLES });
  expect(MALLOC_TUNABLES).toBe('glibc.malloc.trim_threshold=33554432');
});

it("leaves an operator's own tunables alone", () => {
  expect(allocatorEnv({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })).toEqual({});
});

it('is what the Dockerfile sets for the server', () => {
  const dockerfile = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
  expect(dockerfile).toContain(`ENV GLIBC_TUNABLES=${MALLOC_TUNABLES}\n`);
});
