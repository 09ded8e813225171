/**
 * `[tls]`: velodex serves HTTPS with a certificate chain and its key, both PEM files. Only the
 * paths are checked here: the files are read when the server starts (`tls/pair.ts`), so a
 * config that names the mount paths of a Secret not yet mounted still loads (the operator checks
 * its configs that way).
 */
import { ConfigError } from './errors.js';
import type { FileConfig } from './schema.js';

export interface TlsConfig {
  /** The certificate chain, PEM: the server's certificate first, then any intermediates. */
  certFile: string;
  /** The certificate's private key, PEM (unencrypted). */
  keyFile: string;
}

export function resolveTls(table: FileConfig['tls']): TlsConfig | undefined {
  if (table === undefined) return undefined;
  const { cert_file: certFile, key_file: keyFile } = table;
  if (certFile !== undefined && keyFile !== undefined) return { certFile, keyFile };
  const missing = certFile === undefined && keyFile === undefined ? ['cert_file', 'key_file'] : certFile === undefined ? ['cert_file'] : ['key_file'];
  throw new ConfigError(
    `tls.${missing[0]}`,
    `is missing: [tls] needs both cert_file and key_file (${missing.join(' and ')} not given)`,
    'set cert_file to the PEM certificate chain and key_file to its PEM private key, or remove [tls] to serve plain HTTP',
  );
}
