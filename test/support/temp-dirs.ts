/**
 * Temp folders of the suites, removed when the test file that made them is done
 * (test/support/cleanup.ts, a setup file, runs `removeTempDirs` after the file's own hooks have
 * stopped its servers). A full `make test` moves tens of gigabytes through temp folders (1 GiB
 * layers, 512 MiB wheels, MinIO data); kept to the end, they fill a CI machine's disk.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

export function tempDir(prefix = 'velodex-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
