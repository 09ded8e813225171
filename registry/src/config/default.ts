/**
 * The embedded default: what `velodex serve` runs with no config file. One hosted index of every
 * ecosystem (Python at `root/hosted`, OCI at `root/oci`: their facts say where), all writable
 * with one upload token taken from VELODEX_UPLOAD_TOKEN or generated once into
 * `<data_dir>/upload-token` (mode 0600).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EcosystemFacts } from './ecosystem-facts.js';

export function uploadTokenPath(dataDir: string): string {
  return join(dataDir, 'upload-token');
}

/** Returns the path of the token file, creating it with a fresh token when absent. */
export function ensureUploadTokenFile(dataDir: string): string {
  const path = uploadTokenPath(dataDir);
  mkdirSync(dataDir, { recursive: true });
  try {
    if (readFileSync(path, 'utf8').trim() !== '') return path;
  } catch {
    // absent: create it below
  }
  // Hex behind a fixed prefix: a token that began with '-' (base64url can) would be read as an
  // option by command-line clients such as `twine upload -p <token>`.
  const token = `velodex_${randomBytes(24).toString('hex')}`;
  // 'wx' refuses to overwrite a file a concurrent start-up just wrote.
  try {
    writeFileSync(path, `${token}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  chmodSync(path, 0o600);
  return path;
}

/** One hosted index of every ecosystem, each where its facts say, all with the one token. */
export function embeddedDefault(dataDir: string, env: NodeJS.ProcessEnv, ecosystems: readonly EcosystemFacts[]): Record<string, unknown> {
  const token = env.VELODEX_UPLOAD_TOKEN
    ? { upload_token_env: 'VELODEX_UPLOAD_TOKEN' }
    : { upload_token_file: ensureUploadTokenFile(dataDir) };
  return {
    index: ecosystems.map((e) => ({ ...e.embeddedDefault, ecosystem: e.id, hosted: true, ...token })),
  };
}
