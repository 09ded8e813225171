/**
 * vitest setupFile of the `s3` project (vitest.config.ts): every server a suite starts stores on
 * the run's MinIO (test/support/s3-global.ts), as with `VELODEX_TEST_STORAGE=s3`.
 */
import { inject } from 'vitest';
import { BACKEND_VAR, MINIO_PROVIDED, publishSharedMinio } from './backend.js';

process.env[BACKEND_VAR] = 's3';
publishSharedMinio(inject(MINIO_PROVIDED));
