/**
 * Serves a rewritten certificate without a restart. Kubernetes updates a mounted Secret by
 * swapping a symlink, which file watchers miss, so the two files are read every few seconds and
 * their contents compared (not their modification times, which a swap does not change the way a
 * watcher expects). A changed pair that parses and matches is handed to `apply`
 * (`server.setSecureContext`): new connections get it, open ones keep theirs.
 *
 * A changed pair that does not parse is given one more poll before it is refused: a person or a
 * tool that writes the certificate and then the key is seen half-way. Still broken at the next
 * poll, it is refused with one warning (per distinct content) and the served pair stays.
 */
import { ConfigError } from '../config/errors.js';
import type { TlsConfig } from '../config/tls.js';
import { checkCertificatePair, pairDigest, readPairFiles, type CertificatePair } from './pair.js';

/** The part of a logger the reload writes to (pino's and fastify's fit). */
export interface ReloadLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** Short enough that a rotated certificate is served soon after the kubelet has written it; two small reads. */
export const TLS_POLL_MS = 2_000;

/** Starts polling; returns the function that stops it. */
export function reloadCertificatePair(files: TlsConfig, served: CertificatePair, apply: (pair: CertificatePair) => void, log: ReloadLog, everyMs = TLS_POLL_MS): () => void {
  // What is served now: a warning names its fingerprint.
  let current = served;
  /** A broken content seen once: refused if the next poll still sees it. */
  let pending: string | null = null;
  /** A broken content already warned about: not warned again. */
  let refused: string | null = null;
  let busy = false;

  const poll = async (): Promise<void> => {
    let seen: string;
    let pair: CertificatePair | ConfigError;
    try {
      const { cert, key } = await readPairFiles(files);
      seen = pairDigest(cert, key);
      if (seen === current.digest || seen === refused) {
        pending = null;
        return;
      }
      pair = checkOrError(files, cert, key);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      // Unreadable (mid-swap, or gone): its problem is its identity, so it too is warned about once.
      seen = `unreadable:${err.message}`;
      if (seen === refused) return;
      pair = err;
    }
    if (!(pair instanceof ConfigError)) {
      apply(pair);
      current = pair;
      pending = refused = null;
      log.info({ event: 'tls_reloaded', ...leafFields(pair) }, 'serving the rewritten TLS certificate');
      return;
    }
    if (pending !== seen) {
      pending = seen;
      return;
    }
    refused = seen;
    pending = null;
    log.warn(
      { event: 'tls_reload_refused', where: pair.where, reason: pair.problem, serving: current.leaf.fingerprint256 },
      'the rewritten TLS certificate files are not a usable pair; still serving the previous certificate',
    );
  };

  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    poll()
      .catch((err: unknown) => log.warn({ event: 'tls_reload_failed', err }, 'checking the TLS certificate files failed; the next poll tries again'))
      .finally(() => (busy = false));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

function checkOrError(files: TlsConfig, cert: Buffer, key: Buffer): CertificatePair | ConfigError {
  try {
    return checkCertificatePair(files, cert, key);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
}

/** The served certificate as log fields: public facts only. */
export function leafFields(pair: CertificatePair): Record<string, string> {
  return { fingerprint256: pair.leaf.fingerprint256, subject: pair.leaf.subject, serial: pair.leaf.serialNumber, valid_to: pair.leaf.validTo };
}
