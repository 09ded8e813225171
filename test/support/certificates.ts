/**
 * A certificate authority of the test's own, made with openssl (from hack/tools.sh), and server
 * certificates for 127.0.0.1 (or other names) it signs: a server of the test's own (or velodex with `[tls]`)
 * speaks https with one, and a client trusts it through `ca.pem` (`--cert`, `SSL_CERT_FILE`,
 * `NODE_EXTRA_CA_CERTS`). Each certificate issued gets its own name, serial and key, so a test
 * can tell which one a server serves (`fingerprint256`).
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface IssuedCertificate {
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
  /** As `tls.TLSSocket.getPeerCertificate().fingerprint256` prints it. */
  fingerprint256: string;
}

export interface TestCa {
  /** The CA's certificate, PEM: what a client is told to trust. */
  caFile: string;
  /**
   * A new key and a certificate signed by the CA, as `<name>.pem` and `<name>.key` in the CA's
   * folder: for the CA's subject names, or for `subjectAltName` when given (openssl's spelling).
   */
  issue(name: string, subjectAltName?: string): IssuedCertificate;
}

const openssl = (...args: string[]): void => {
  execFileSync('openssl', args, { stdio: 'ignore' });
};

/** `subjectAltName`: what every certificate it issues is for, in openssl's spelling (`IP:…`, `DNS:…`, comma-separated). */
export function testCa(dir: string, subjectAltName = 'IP:127.0.0.1'): TestCa {
  const f = (name: string) => join(dir, name);
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=velodex test CA', '-keyout', f('ca.key'), '-out', f('ca.pem'));
  const extensions = (names: string) => `subjectAltName=${names}\nbasicConstraints=CA:FALSE\n`;
  writeFileSync(f('server.ext'), extensions(subjectAltName));
  return {
    caFile: f('ca.pem'),
    issue(name, names) {
      const extFile = names === undefined ? f('server.ext') : f(`${name}.ext`);
      if (names !== undefined) writeFileSync(extFile, extensions(names));
      const keyFile = f(`${name}.key`);
      const certFile = f(`${name}.pem`);
      openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=velodex test ${name}`, '-keyout', keyFile, '-out', f(`${name}.csr`));
      // -CAcreateserial: every certificate of this CA gets the next serial.
      openssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '2', '-out', certFile, '-extfile', extFile);
      const cert = readFileSync(certFile);
      return { certFile, keyFile, cert, key: readFileSync(keyFile), fingerprint256: new X509Certificate(cert).fingerprint256 };
    },
  };
}

/** One CA and one server certificate in `dir`: the key and certificate bytes and the CA's file. */
export function testCertificates(dir: string): { key: Buffer; cert: Buffer; caFile: string } {
  const ca = testCa(dir);
  const server = ca.issue('server');
  return { key: server.key, cert: server.cert, caFile: ca.caFile };
}
