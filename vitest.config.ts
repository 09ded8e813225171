import { defineConfig } from 'vitest/config';

/**
 * Two projects, so a plain `npx vitest run` runs everything `make test` runs:
 * - `fs`: every suite, its servers on the filesystem backend;
 * - `s3`: the suites whose servers' store can be switched, again on one real MinIO
 *   (test/support/s3-global.ts starts it, test/support/s3-backend.ts points the suites at it).
 * The storage suites test both backends themselves; config, cli and http test the command, the
 * loader and request parsing, which no store changes; the suites that start several processes
 * on a MinIO of their own run on s3 already in the first pass.
 *
 * `--project fs` or `--project s3` runs one (`make test-fs`, `make test-s3`). With
 * `VELODEX_TEST_STORAGE` set, the given files run once, on that backend (the way to run one
 * suite on s3: `VELODEX_TEST_STORAGE=s3 npx vitest run test/oci/push.test.ts`).
 */
const S3_SUITES = [
  'test/python/**/*.test.ts',
  'test/oci/**/*.test.ts',
  'test/access/**/*.test.ts',
  'test/roles/**/*.test.ts',
  'test/discovery/**/*.test.ts',
  'test/events/**/*.test.ts',
  'test/observe/**/*.test.ts',
  'test/limits/**/*.test.ts',
  'test/archive/**/*.test.ts',
  'test/lifecycle/gc.test.ts',
  'test/lifecycle/quota.test.ts',
  'test/lifecycle/budget.test.ts',
  'test/tls/clients.test.ts',
];
const S3_OWN_MINIO = ['**/multiprocess.test.ts', '**/sessions-shared.test.ts'];
const NOT_SUITES = ['test/bench/**', 'node_modules/**'];

const shared = {
  setupFiles: ['test/support/cleanup.ts'],
  testTimeout: 300_000,
  hookTimeout: 120_000,
  pool: 'forks' as const,
};

export default defineConfig({
  test: {
    // Two cores: suites start servers and real clients; more workers only fight for CPU.
    maxWorkers: 2,
    reporters: ['default'],
    ...(process.env.VELODEX_TEST_STORAGE
      ? { ...shared, include: ['test/**/*.test.ts'], exclude: NOT_SUITES, globalSetup: ['test/support/s3-global.ts'] }
      : {
          projects: [
            { test: { ...shared, name: 'fs', include: ['test/**/*.test.ts'], exclude: NOT_SUITES } },
            {
              test: {
                ...shared,
                name: 's3',
                include: S3_SUITES,
                exclude: [...NOT_SUITES, ...S3_OWN_MINIO],
                globalSetup: ['test/support/s3-global.ts'],
                setupFiles: ['test/support/s3-backend.ts', ...shared.setupFiles],
              },
            },
          ],
        }),
  },
});
