/**
 * The certificate chain and key velodex serves HTTPS with (`[tls]`), read and checked before they
 * are used: the chain parses as PEM certificates, the key as a PEM private key, and the key is the
 * certificate's. A problem is a `ConfigError` naming the file and what is wrong with it; no text
 * of a key file ever goes into a message (OpenSSL's own messages are left out for the key).
 */
import { createHash, createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { ConfigError } from '../config/errors.js';
import type { TlsConfig } from '../config/tls.js';

export interface CertificatePair {
  cert: Buffer;
  key: Buffer;
  /** What a client sees of the served certificate, for the log lines: never key material. */
  leaf: { fingerprint256: string; subject: string; serialNumber: string; validTo: string };
  /** The digest of both files' bytes: the reload compares contents, not modification times. */
  digest: string;
}

/** The two files' bytes, or a `ConfigError` naming the one that cannot be read. */
export async function readPairFiles(files: TlsConfig): Promise<{ cert: Buffer; key: Buffer }> {
  const read = async (path: string, key: 'cert_file' | 'key_file'): Promise<Buffer> => {
    try {
      return await readFile(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'an error';
      throw new ConfigError(`tls.${key}`, `cannot read ${path} (${code})`, `make ${path} readable by velodex, or point tls.${key} at the file`);
    }
  };
  const [cert, key] = await Promise.all([read(files.certFile, 'cert_file'), read(files.keyFile, 'key_file')]);
  return { cert, key };
}

/** Reads and checks the pair `[tls]` names. */
export async function readCertificatePair(files: TlsConfig): Promise<CertificatePair> {
  const { cert, key } = await readPairFiles(files);
  return checkCertificatePair(files, cert, key);
}

export function pairDigest(cert: Buffer, key: Buffer): string {
  return createHash('sha256').update(createHash('sha256').update(cert).digest()).update(createHash('sha256').update(key).digest()).digest('hex');
}

/** The pair if the bytes make one a TLS server can serve; a `ConfigError` naming the file at fault if not. */
export function checkCertificatePair(files: TlsConfig, cert: Buffer, key: Buffer): CertificatePair {
  const leaf = parseLeaf(files.certFile, cert);
  const privateKey = parseKey(files.keyFile, key);
  if (!leaf.checkPrivateKey(privateKey)) {
    throw new ConfigError('tls.key_file', `the key in ${files.keyFile} is not the key of the certificate in ${files.certFile}`, 'give the key the certificate was issued for (a Secret\'s tls.key beside its tls.crt)');
  }
  try {
    // What the server will do with them: catches what the checks above do not (a broken intermediate).
    createSecureContext({ cert, key });
  } catch (err) {
    throw new ConfigError('tls.cert_file', `${files.certFile} cannot be served with its key: ${certificateReason(err)}`, 'check the chain: the server certificate first, then its intermediates');
  }
  return {
    cert,
    key,
    leaf: { fingerprint256: leaf.fingerprint256, subject: leaf.subject.replaceAll('\n', ', '), serialNumber: leaf.serialNumber, validTo: leaf.validTo },
    digest: pairDigest(cert, key),
  };
}

function parseLeaf(path: string, cert: Buffer): X509Certificate {
  const fix = 'give a PEM certificate chain (-----BEGIN CERTIFICATE-----), the server certificate first';
  if (!cert.includes('-----BEGIN CERTIFICATE-----')) throw new ConfigError('tls.cert_file', `${path} holds no PEM certificate`, fix);
  try {
    return new X509Certificate(cert);
  } catch (err) {
    throw new ConfigError('tls.cert_file', `${path} does not parse as a PEM certificate: ${certificateReason(err)}`, fix);
  }
}

function parseKey(path: string, key: Buffer): KeyObject {
  const fix = 'give an unencrypted PEM private key (-----BEGIN PRIVATE KEY-----, or the RSA / EC forms)';
  if (!key.includes('-----BEGIN ')) throw new ConfigError('tls.key_file', `${path} holds no PEM block`, fix);
  try {
    return createPrivateKey(key);
  } catch {
    // OpenSSL's message is left out on purpose: whatever it quotes came from the key file.
    throw new ConfigError('tls.key_file', `${path} does not parse as a PEM private key (or it is encrypted)`, fix);
  }
}

/** OpenSSL's reason for a certificate it refused, one line (certificates are public: quoting is safe). */
function certificateReason(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'unknown';
}
