/**
 * Removes local files a killed process left behind, by age: the fs backend's staging folder and
 * the s3 backend's scratch folder are both swept this way when their store opens.
 */
import { readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { unlessMissing } from './missing.js';

export interface SweepOptions {
  /** Files not written to for this long are removed; younger ones may be live and stay. */
  olderThanMs: number;
  now: () => number;
  /** Only names this accepts are considered (default: every file). */
  only?: (name: string) => boolean;
}

/** Returns how many files were removed. */
export async function sweepStaleFiles(dir: string, opts: SweepOptions): Promise<number> {
  let removed = 0;
  for (const name of await readdir(dir)) {
    if (opts.only && !opts.only(name)) continue;
    const path = join(dir, name);
    const s = await unlessMissing(stat(path));
    if (!s?.isFile() || opts.now() - s.mtimeMs < opts.olderThanMs) continue;
    if ((await unlessMissing(unlink(path))) !== null) removed++;
  }
  return removed;
}
