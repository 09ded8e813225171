/**
 * A small HTTP proxy the tests put in front of a real upstream, to make it misbehave on purpose:
 * per request pattern it passes through, flips a byte, stalls (before the response or after N
 * body bytes, for N ms or until released), drops the connection after N bytes, or answers a
 * status of its own. It counts requests per path, so a test can assert one upstream fetch.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FaultAction =
  | { kind: 'pass' }
  /** Flips the byte at offset `at` of the body (default: the middle, by Content-Length). */
  | { kind: 'corrupt'; at?: number }
  /** Holds the response — before it starts, or after `afterBytes` body bytes — for `ms`, or until `release()`. */
  | { kind: 'stall'; ms?: number; afterBytes?: number }
  /** Sends the headers and `afterBytes` body bytes, then destroys the connection. */
  | { kind: 'drop'; afterBytes: number }
  /** Answers `status` itself (with `headers`, if any) without asking the upstream. */
  | { kind: 'status'; status: number; body?: string; headers?: Record<string, string> };

export interface SeenRequest {
  method: string;
  path: string;
  range: string | undefined;
}

/** A function also sees the method, to single out one verb on a path (a PUT, not the GET). */
export type PathMatch = string | RegExp | ((path: string, method: string) => boolean);

interface Rule {
  match: PathMatch;
  action: FaultAction;
  /** How many more requests the rule applies to; undefined: all. */
  remaining: number | undefined;
}

export class FaultProxy {
  readonly url: string;
  readonly #server: http.Server;
  readonly #target: URL;
  readonly #agent = new http.Agent({ keepAlive: true });
  readonly #rules: Rule[] = [];
  readonly #counts = new Map<string, number>();
  readonly #log: string[] = [];
  readonly #seen: SeenRequest[] = [];
  #stalls: Array<(how: 'go' | 'drop') => void> = [];
  #stallWatchers: Array<{ n: number; resolve: () => void }> = [];
  #stalledTotal = 0;

  readonly #keepHost: boolean;

  private constructor(server: http.Server, target: URL, keepHost: boolean) {
    this.#server = server;
    this.#target = target;
    this.#keepHost = keepHost;
    const { port } = server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${port}`;
  }

  /**
   * Starts a proxy on a free 127.0.0.1 port in front of `target` (an origin URL). `keepHost`
   * forwards the client's Host header unchanged, for an upstream that checks signatures over it
   * (S3's SigV4 signs the Host the client sent: the proxy's).
   */
  static async start(target: string, opts: { keepHost?: boolean } = {}): Promise<FaultProxy> {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new FaultProxy(server, new URL(target), opts.keepHost ?? false);
    server.on('request', (req, res) => {
      proxy.#handle(req, res).catch(() => res.destroy());
    });
    return proxy;
  }

  /** Applies `action` to requests whose path (query excluded) matches; later rules win. */
  on(match: PathMatch, action: FaultAction, times?: number): this {
    this.#rules.push({ match, action, remaining: times });
    return this;
  }

  /** Back to passing everything through. */
  clear(): void {
    this.#rules.length = 0;
  }

  /** Requests seen for `path` (query excluded). */
  count(path: string): number {
    return this.#counts.get(path) ?? 0;
  }

  /** Every request seen, as `METHOD path`, in order. */
  get requests(): readonly string[] {
    return this.#log;
  }

  /** Every request seen with its `Range` header (undefined when none), in order. */
  get seen(): readonly SeenRequest[] {
    return this.#seen;
  }

  /** Resumes every stalled response. */
  release(): void {
    const stalls = this.#stalls;
    this.#stalls = [];
    for (const s of stalls) s('go');
  }

  /** Ends the connection of every response stalled mid-body: the upstream died mid-transfer. */
  dropStalled(): void {
    const stalls = this.#stalls;
    this.#stalls = [];
    for (const s of stalls) s('drop');
  }

  /** How many responses have reached a stall so far. */
  stalledCount(): number {
    return this.#stalledTotal;
  }

  /** Resolves once `n` responses in total have reached a stall. */
  stalled(n = 1): Promise<void> {
    if (this.#stalledTotal >= n) return Promise.resolve();
    return new Promise((resolve) => this.#stallWatchers.push({ n, resolve }));
  }

  /**
   * The upstream dies: the port stops listening (new connections are refused) and every open
   * connection is cut. `revive` listens on the same port again.
   */
  async kill(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeAllConnections();
    await closed;
  }

  async revive(): Promise<void> {
    const port = Number(new URL(this.url).port);
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, '127.0.0.1', () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
  }

  async close(): Promise<void> {
    // Connections first: a request still stalled is dropped, not sent on to the upstream.
    this.#server.closeAllConnections();
    this.release();
    this.#agent.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #action(path: string, method: string): FaultAction {
    for (let i = this.#rules.length - 1; i >= 0; i--) {
      const rule = this.#rules[i]!;
      if (!matches(rule.match, path, method)) continue;
      if (rule.remaining !== undefined) {
        if (rule.remaining <= 0) continue;
        rule.remaining--;
      }
      return rule.action;
    }
    return { kind: 'pass' };
  }

  #stall(ms: number | undefined): Promise<'go' | 'drop'> {
    this.#stalledTotal++;
    this.#stallWatchers = this.#stallWatchers.filter((w) => {
      if (this.#stalledTotal < w.n) return true;
      w.resolve();
      return false;
    });
    return new Promise<'go' | 'drop'>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (how: 'go' | 'drop'): void => {
        if (timer) clearTimeout(timer);
        resolve(how);
      };
      this.#stalls.push(done);
      if (ms !== undefined) timer = setTimeout(() => done('go'), ms);
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    this.#counts.set(path, this.count(path) + 1);
    this.#log.push(`${req.method} ${path}`);
    this.#seen.push({ method: req.method ?? 'GET', path, range: req.headers.range });
    const action = this.#action(path, req.method ?? 'GET');
    if (action.kind === 'status') {
      req.resume();
      res.writeHead(action.status, { 'content-type': 'text/plain', ...action.headers }).end(action.body ?? `fault proxy: ${action.status}\n`);
      return;
    }
    if (action.kind === 'stall' && action.afterBytes === undefined && (await this.#stall(action.ms)) === 'drop') res.destroy();
    if (res.destroyed) return;
    const upstream = await this.#forward(req);
    res.on('close', () => upstream.destroy());
    res.writeHead(upstream.statusCode ?? 502, upstream.headers);
    const length = Number(upstream.headers['content-length'] ?? NaN);
    const flipAt = action.kind === 'corrupt' ? (action.at ?? (Number.isFinite(length) ? Math.floor(length / 2) : 0)) : -1;
    let sent = 0;
    let stalledOnce = false;
    for await (const raw of upstream as AsyncIterable<Buffer>) {
      let chunk = raw;
      if (flipAt >= sent && flipAt < sent + chunk.length) {
        chunk = Buffer.from(chunk);
        chunk[flipAt - sent] = chunk[flipAt - sent]! ^ 0xff;
      }
      if (action.kind === 'drop' && sent + chunk.length >= action.afterBytes) {
        const head = chunk.subarray(0, action.afterBytes - sent);
        res.write(head, () => res.socket?.destroy());
        upstream.destroy();
        return;
      }
      if (action.kind === 'stall' && action.afterBytes !== undefined && !stalledOnce && sent + chunk.length >= action.afterBytes) {
        stalledOnce = true;
        const cut = action.afterBytes - sent;
        await writeChunk(res, chunk.subarray(0, cut));
        sent += cut;
        chunk = chunk.subarray(cut);
        if ((await this.#stall(action.ms)) === 'drop') {
          res.socket?.destroy();
          upstream.destroy();
          return;
        }
        if (res.destroyed) return;
      }
      await writeChunk(res, chunk);
      sent += chunk.length;
    }
    res.end();
  }

  #forward(req: IncomingMessage): Promise<IncomingMessage> {
    const headers = this.#keepHost ? req.headers : { ...req.headers, host: this.#target.host };
    return new Promise((resolve, reject) => {
      const out = http.request(
        { host: this.#target.hostname, port: this.#target.port, method: req.method, path: req.url, headers, agent: this.#agent },
        resolve,
      );
      out.on('error', reject);
      req.pipe(out);
    });
  }
}

function matches(match: PathMatch, path: string, method: string): boolean {
  if (typeof match === 'string') return match === path;
  if (match instanceof RegExp) return match.test(path);
  return match(path, method);
}

/** Writes `chunk`, resolving once the response can take more (or has gone away). */
export function writeChunk(res: ServerResponse, chunk: Buffer): Promise<void> {
  if (chunk.length === 0 || res.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    if (res.write(chunk)) resolve();
    else {
      const done = (): void => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    }
  });
}
