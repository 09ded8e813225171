import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/bench/**', 'node_modules/**'],
    globalSetup: ['test/support/s3-global.ts'],
    setupFiles: ['test/support/cleanup.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two cores: suites start servers and real clients; more workers only fight for CPU.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
