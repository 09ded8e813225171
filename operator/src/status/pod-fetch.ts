/**
 * One GET of a registry pod's `/+status`, by its IP: plain HTTP, or HTTPS when the registry
 * serves its certificate (`spec.tls`). Bounded in time and size.
 *
 * Over HTTPS the pod's certificate is not verified: it names the registry's Service or external
 * host, never a pod IP, and its issuer may be any the platform uses. What makes that safe here:
 * the address is the pod's, as the API server reports it for a pod of the registry's Deployment;
 * the request carries no credential; and the answer only feeds the resource's status.
 */
import http from 'node:http';
import https from 'node:https';

/** A status document is a few KiB per index; more is refused. */
const MAX_STATUS_BYTES = 4 * 1024 * 1024;

export function getPodStatus(ip: string, port: number, tls: boolean, timeoutMs: number): Promise<unknown> {
  const host = ip.includes(':') ? `[${ip}]` : ip;
  const url = `${tls ? 'https' : 'http'}://${host}:${port}/+status`;
  return new Promise((resolve, reject) => {
    const options = { timeout: timeoutMs, headers: { accept: 'application/json' }, ...(tls ? { rejectUnauthorized: false } : {}) };
    const req = (tls ? https : http).get(url, options, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`/+status answered ${res.statusCode}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_STATUS_BYTES) {
          res.destroy();
          reject(new Error(`/+status answered more than ${MAX_STATUS_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => {
        try {
          resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        } catch {
          reject(new Error('/+status answered no JSON document'));
        }
      });
      res.on('error', reject);
    });
    // `timeout` is idle time on the socket; the whole exchange is bounded as well.
    const deadline = setTimeout(() => req.destroy(new Error(`/+status did not answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('close', () => clearTimeout(deadline));
    req.on('timeout', () => req.destroy(new Error(`/+status did not answer within ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}
