/**
 * HTTP on the wire as the test writes it. `rawRequest`: a request whose path goes on the wire
 * exactly as given. `fetch` normalises paths per the
 * URL standard (it turns `%2e%2e` into `..` and resolves it), which hides exactly the attacks the
 * path-safety tests must send. A body, if any, is sent as given too (malformed forms included),
 * with exactly the headers given (`fetch` would add a `Content-Type` to a string body).
 */
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

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
  /**
   * The local address to connect from. Every 127.x.y.z is loopback on Linux, so a test can speak
   * as a peer other than 127.0.0.1 (one that is not a trusted proxy, or a client of its own for a
   * per-address count) to a server listening on 127.0.0.1.
   */
  localAddress?: string;
}

export function rawRequest(baseUrl: string, path: string, method = 'GET', headers: Record<string, string> = {}, opts: RawOptions = {}): Promise<RawResponse> {
  const base = new URL(baseUrl);
  const body = opts.body === undefined ? undefined : Buffer.from(opts.body);
  const sent = body && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length') ? { ...headers, 'content-length': String(body.length) } : headers;
  return new Promise((resolve, reject) => {
    const req = request({ host: base.hostname, port: base.port, method, path, headers: sent, ...(opts.localAddress ? { localAddress: opts.localAddress } : {}) }, (res) => {
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

/**
 * One HTTP/1.1 connection driven by hand: the test decides when each byte of a request goes out,
 * sees every response as it arrives, and sees the server close the connection. For what `fetch`
 * and `http.request` hide: an answer that comes before the body was sent, and connection reuse.
 */
export class RawConnection {
  #buffer = Buffer.alloc(0);
  #waiters: (() => void)[] = [];
  #ended = false;
  /** Resolves when the server closed the connection (or it broke). */
  readonly ended: Promise<void>;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#wake();
    });
    this.ended = new Promise((resolve) => {
      const end = () => {
        this.#ended = true;
        this.#wake();
        resolve();
      };
      socket.once('end', end).once('close', end).on('error', () => undefined);
    });
  }

  /** `localAddress`: connect from there (see `RawOptions.localAddress`). */
  static open(baseUrl: string, localAddress?: string): Promise<RawConnection> {
    const base = new URL(baseUrl);
    return new Promise((resolve, reject) => {
      const socket = connect({ host: base.hostname, port: Number(base.port), ...(localAddress ? { localAddress } : {}) }, () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  /** Writes bytes; false when the connection is already gone. */
  write(data: string | Buffer): Promise<boolean> {
    if (this.socket.destroyed || this.socket.writableEnded) return Promise.resolve(false);
    return new Promise((resolve) => this.socket.write(data, (err) => resolve(!err)));
  }

  /** True when response bytes have arrived that no `response()` has taken yet. */
  get answered(): boolean {
    return this.#buffer.length > 0;
  }

  get isEnded(): boolean {
    return this.#ended;
  }

  /** Everything received that no `response()` has taken, as text (an answer the server wrote before it closed). */
  get pending(): string {
    return this.#buffer.toString('latin1');
  }

  /** The next response; `head` for an answer to HEAD (headers only). Bodies are framed by Content-Length. */
  async response(head = false): Promise<RawResponse> {
    for (;;) {
      const parsed = this.#take(head);
      if (parsed) return parsed;
      if (this.#ended) throw new Error(`connection closed before a complete response (${this.#buffer.length} bytes pending)`);
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  close(): void {
    this.socket.destroy();
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }

  #take(head: boolean): RawResponse | null {
    const end = this.#buffer.indexOf('\r\n\r\n');
    if (end === -1) return null;
    const [statusLine = '', ...lines] = this.#buffer.subarray(0, end).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    if (headers['transfer-encoding'] !== undefined) throw new Error('chunked responses are not supported here');
    const status = Number(statusLine.split(' ')[1]);
    const length = head || status === 204 || status === 304 ? 0 : Number(headers['content-length'] ?? '0');
    if (this.#buffer.length < end + 4 + length) return null;
    const body = this.#buffer.subarray(end + 4, end + 4 + length).toString('utf8');
    this.#buffer = this.#buffer.subarray(end + 4 + length);
    return { status, headers, body };
  }
}

/** The head of a request, with Host and the given headers. */
export function requestHead(method: string, path: string, headers: Record<string, string>): string {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  return `${lines.join('\r\n')}\r\n\r\n`;
}
