/**
 * A load balancer without affinity, for the tests of several velodex processes on one store: each
 * *request* (not each connection: a client's kept-alive connection does not pin it) goes to the
 * next of N targets in turn, as behind a Kubernetes Service whose kube-proxy spreads requests, or
 * an ingress without session affinity. The `Host` header is passed on as the client sent it. Each
 * request is recorded with the target that served it, so a test can show that the verbs of one
 * upload really reached different processes. A target that fails mid-response (killed) ends the
 * client's connection the same way.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Served {
  method: string;
  path: string;
  /** Index of the target in the list given to `start`. */
  target: number;
  status?: number;
  /** The response's `Location` (where a POST says its upload session is). */
  location?: string;
}

export class RoundRobinProxy {
  readonly url: string;
  /** Every request so far, in arrival order. */
  readonly served: Served[] = [];
  readonly #server: http.Server;
  readonly #targets: URL[];
  readonly #agents: http.Agent[];
  #next = 0;

  private constructor(server: http.Server, targets: URL[]) {
    this.#server = server;
    this.#targets = targets;
    this.#agents = targets.map(() => new http.Agent({ keepAlive: true }));
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** Starts the proxy on a free 127.0.0.1 port in front of `targets` (origin URLs). */
  static async start(targets: string[]): Promise<RoundRobinProxy> {
    if (targets.length === 0) throw new Error('a round-robin proxy needs at least one target');
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new RoundRobinProxy(
      server,
      targets.map((t) => new URL(t)),
    );
    server.on('request', (req, res) => proxy.#forward(req, res));
    return proxy;
  }

  /** `host:port` of the proxy, as image references want it. */
  get host(): string {
    return new URL(this.url).host;
  }

  /**
   * The targets that served each upload session, by session id: the POST that opened it (its
   * `Location` names the id) and every request to the session's URL, in order.
   */
  sessionTargets(): Map<string, number[]> {
    const out = new Map<string, number[]>();
    const idOf = (path: string | undefined) => /\/blobs\/uploads\/([^/?]+)/.exec(path ?? '')?.[1];
    for (const s of this.served) {
      const id = s.method === 'POST' ? idOf(s.location) : idOf(s.path);
      if (id === undefined) continue;
      out.set(id, [...(out.get(id) ?? []), s.target]);
    }
    return out;
  }

  #forward(req: IncomingMessage, res: ServerResponse): void {
    const index = this.#next;
    this.#next = (this.#next + 1) % this.#targets.length;
    const target = this.#targets[index] as URL;
    const record: Served = { method: req.method ?? 'GET', path: req.url ?? '/', target: index };
    this.served.push(record);
    const upstream = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent: this.#agents[index] },
      (up) => {
        record.status = up.statusCode;
        if (typeof up.headers.location === 'string') record.location = up.headers.location;
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
        up.on('error', () => res.destroy());
        up.on('aborted', () => res.destroy());
      },
    );
    upstream.on('error', () => {
      if (res.headersSent) res.destroy();
      else if (!res.destroyed) res.writeHead(502, { 'content-type': 'text/plain' }).end('round-robin proxy: target failed\n');
    });
    req.pipe(upstream);
    req.on('aborted', () => upstream.destroy());
  }

  async close(): Promise<void> {
    for (const a of this.#agents) a.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
