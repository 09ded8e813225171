/**
 * vitest globalSetup: on an s3 run (`VELODEX_TEST_STORAGE=s3`), one real MinIO for every suite,
 * stopped by its PID when the run ends. The test processes inherit its address and keys.
 */
import { publishSharedMinio, testBackend } from './backend.js';
import { startMinio, type Minio } from './minio.js';

let minio: Minio | undefined;

export async function setup(): Promise<void> {
  if (testBackend() !== 's3') return;
  minio = await startMinio();
  publishSharedMinio({ endpoint: minio.endpoint, bucket: minio.bucket, accessKey: minio.accessKey, secretKey: minio.secretKey });
}

export async function teardown(): Promise<void> {
  await minio?.stop();
}
