/**
 * An HTTP request whose path goes on the wire exactly as given. `fetch` normalises paths per the
 * URL standard (it turns `%2e%2e` into `..` and resolves it), which hides exactly the attacks the
 * path-safety tests must send. A body, if any, is sent as given too (malformed forms included).
 */
import { request } from 'node:http';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface RawOptions {
  /** Sent as is; `content-length` is added unless `headers` has one. */
  body?: Buffer | string;
  /**
   * Fail (reject) when no whole response arrived within this many milliseconds: a server that
   * hangs makes the test fail instead of waiting forever. Not a speed assertion.
   */
  timeoutMs?: number;
}

export function rawRequest(baseUrl: string, path: string, method = 'GET', headers: Record<string, string> = {}, opts: RawOptions = {}): Promise<RawResponse> {
  const base = new URL(baseUrl);
  const body = opts.body === undefined ? undefined : Buffer.from(opts.body);
  const sent = body && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length') ? { ...headers, 'content-length': String(body.length) } : headers;
  return new Promise((resolve, reject) => {
    const req = request({ host: base.hostname, port: base.port, method, path, headers: sent }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
      });
      res.on('error', reject);
    });
    const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer to ${method} ${path} within ${opts.timeoutMs} ms: the server hung`));
    }, opts.timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      // A server may answer and close before it read the whole body; the answer is what counts.
      reject(err);
    });
    req.end(body);
  });
}
