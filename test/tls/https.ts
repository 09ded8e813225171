/** What a test asks of a server over TLS itself, below any client: the certificate it serves, a GET trusting a given CA. */
import { request } from 'node:https';
import { connect } from 'node:tls';

/** The fingerprint of the certificate `port` serves now, to a client that trusts `ca`. */
export function servedFingerprint(port: number, ca: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve(fingerprint);
    });
    socket.once('error', reject);
  });
}

/** A GET over https trusting `ca` alone: status and body. */
export function getTrusting(url: string, ca: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.once('error', reject);
    req.end();
  });
}
