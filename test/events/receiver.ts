/**
 * A webhook receiver for the event suites: a real HTTP server on 127.0.0.1 that records every
 * delivery (path, headers, exact body bytes) and answers with scripted statuses.
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { storeProbe } from '../support/store-probe.js';

export interface Delivery {
  /** Path without the query string. */
  path: string;
  query: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  json: Record<string, unknown>;
}

export class Receiver {
  readonly deliveries: Delivery[] = [];
  /** Statuses to answer next, per path; when a path's script is empty the answer is 200. */
  readonly script = new Map<string, number[]>();
  /** Paths whose next request is held open without an answer (and recorded in `stalled`). */
  readonly stall = new Set<string>();
  readonly stalled: Delivery[] = [];
  #server: Server | undefined;
  port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listens on `port` (0: any free port); a restarted receiver passes its old port. */
  async start(port = 0): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const [path = '', query = ''] = (req.url ?? '').split('?');
        const body = Buffer.concat(chunks);
        const delivery = { path, query, headers: req.headers, body, json: JSON.parse(body.toString('utf8')) as Record<string, unknown> };
        if (this.stall.delete(path)) {
          this.stalled.push(delivery);
          return;
        }
        this.deliveries.push(delivery);
        const status = this.script.get(path)?.shift() ?? 200;
        res.writeHead(status, { 'content-type': 'text/plain' }).end(status >= 300 ? 'receiver says no: do-not-log-this-body' : 'ok');
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.#server = server;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  at(path: string): Delivery[] {
    return this.deliveries.filter((d) => d.path === path);
  }

  /** Waits (bounded) until `path` has received at least `count` deliveries, and returns them. */
  async waitFor(path: string, count: number, timeoutMs = 10_000): Promise<Delivery[]> {
    await until(() => this.at(path).length >= count, timeoutMs, () => `${path}: ${this.at(path).length} of ${count} deliveries`);
    return this.at(path);
  }
}

export async function until(done: () => boolean | Promise<boolean>, timeoutMs: number, what: () => string | Promise<string>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${await what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The recomputed `X-Velodex-Signature` of a received delivery. */
export function expectedSignature(secret: string, d: Delivery): string {
  const ts = String(d.headers['x-velodex-timestamp']);
  const id = String(d.headers['x-velodex-delivery']);
  return `sha256=${createHmac('sha256', secret).update(`${ts}.${id}.`).update(d.body).digest('hex')}`;
}

/** Ids of the deliveries waiting in a server's outbox, read through the store probe. */
export async function outboxIds(dataDir: string): Promise<string[]> {
  const prefix = 'events/outbox';
  return (await (await storeProbe(dataDir)).keys(prefix)).map((k) => k.slice(prefix.length + 1));
}
