/**
 * vitest globalSetup of an s3 run (the `s3` project of vitest.config.ts, or any run with
 * `VELODEX_TEST_STORAGE=s3`): one real MinIO for every suite, stopped by its PID when the run
 * ends. The suites find it through test/support/s3-backend.ts (the project) or the environment
 * they inherit (`VELODEX_TEST_STORAGE=s3`).
 */
import type { TestProject } from 'vitest/node';
import { MINIO_PROVIDED, publishSharedMinio, testBackend, type SharedMinio } from './backend.js';
import { startMinio, type Minio } from './minio.js';

declare module 'vitest' {
  export interface ProvidedContext {
    [MINIO_PROVIDED]: SharedMinio;
  }
}

let minio: Minio | undefined;

export async function setup(project: TestProject): Promise<void> {
  if (project.name !== 's3' && testBackend() !== 's3') return;
  minio = await startMinio();
  const shared: SharedMinio = { endpoint: minio.endpoint, bucket: minio.bucket, accessKey: minio.accessKey, secretKey: minio.secretKey };
  publishSharedMinio(shared);
  project.provide(MINIO_PROVIDED, shared);
}

export async function teardown(): Promise<void> {
  await minio?.stop();
}
