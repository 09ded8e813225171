/**
 * An HTTP request whose path goes on the wire exactly as given. `fetch` normalises paths per the
 * URL standard (it turns `%2e%2e` into `..` and resolves it), which hides exactly the attacks the
 * path-safety tests must send; it also adds a `Content-Type` to string bodies, which the
 * media-type tests must control (a body goes out with exactly the headers given).
 */
import { request } from 'node:http';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export function rawRequest(baseUrl: string, path: string, method = 'GET', headers: Record<string, string> = {}, body?: string | Buffer): Promise<RawResponse> {
  const base = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: base.hostname, port: base.port, method, path, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
