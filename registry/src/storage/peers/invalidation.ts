/**
 * The wire of `[storage] peer_cache`: a writer POSTs the keys it changed to each member's listener
 * (`POST /invalidate`, a JSON `{ "keys": [...] }`), which drops its copies of them and answers 204.
 *
 * The listener is reached only by the other processes of the registry, but any tenant on the
 * network could find it: a request must carry the HMAC-SHA256 of its body under a key kept in the
 * shared store (every process that shares the bucket reads it, nobody else can), the body is bounded, and a client that holds a connection without sending is cut. A forged request
 * could only make a member read the store again; it never reveals anything.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConflictError, type MetaStore } from '../types.js';

const SIGNATURE_HEADER = 'x-velodex-peer-signature';
/** Keys of one write fit many times over. */
const MAX_BODY_BYTES = 64 * 1024;
/** Connections the listener holds at once. */
const MAX_CONNECTIONS = 512;
/** A request that has not arrived whole by then is cut. */
const REQUEST_TIMEOUT_MS = 5_000;

/** Where the key both ends sign with lives: in the shared store, made by the first process that needs it. */
const KEY_DOC = 'peers/key';

/**
 * The signing key of the processes that share the store: read from it, or made (32 random bytes)
 * by the first one. Whoever reads the bucket may read it; nobody else can. Unlike a key derived
 * from the store's credentials, it stays the same when those are rotated, so processes with old
 * and new credentials still accept each other's invalidations.
 */
export async function sharedPeerKey(meta: MetaStore): Promise<Buffer> {
  const found = await meta.get<{ key: string }>(KEY_DOC);
  if (found) return Buffer.from(found.doc.key, 'base64');
  try {
    await meta.put(KEY_DOC, { key: randomBytes(32).toString('base64') }, null);
  } catch (err) {
    // Another process made it first: theirs is the key.
    if (!(err instanceof ConflictError)) throw err;
  }
  const made = await meta.get<{ key: string }>(KEY_DOC);
  if (!made) throw new Error(`the peer cache's key ${KEY_DOC} vanished from the store as it was made`);
  return Buffer.from(made.doc.key, 'base64');
}

function sign(key: Buffer, body: Buffer): string {
  return createHmac('sha256', key).update(body).digest('hex');
}

export interface InvalidationListener {
  /** `http://<host>:<port>`, as other processes reach it. */
  url: string;
  close(): Promise<void>;
}

/** Listens on `host` (a free port) and calls `drop` with the keys of each signed request. */
export async function listenForInvalidations(host: string, key: Buffer, drop: (keys: string[]) => void): Promise<InvalidationListener> {
  const server: Server = createServer((req, res) => answer(req, res, key, drop));
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  // The other processes keep a connection or a few each; nobody needs more.
  server.maxConnections = MAX_CONNECTIONS;
  server.headersTimeout = REQUEST_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Exclusive: a worker process's listen would otherwise share one port with its siblings
    // (the cluster module's default), and an invalidation would reach only one of them.
    server.listen({ port: 0, host, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function answer(req: IncomingMessage, res: ServerResponse, key: Buffer, drop: (keys: string[]) => void): void {
  const refuse = (status: number, message: string): void => {
    res.writeHead(status, { 'content-type': 'text/plain', connection: 'close' }).end(`${message}\n`);
    req.resume();
  };
  if (req.method !== 'POST' || req.url !== '/invalidate') return refuse(404, 'not found');
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) return refuse(413, 'body too large');
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      refuse(413, 'body too large');
      req.destroy();
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (res.headersSent) return;
    const body = Buffer.concat(chunks, size);
    const given = Buffer.from(String(req.headers[SIGNATURE_HEADER] ?? ''), 'hex');
    const expected = Buffer.from(sign(key, body), 'hex');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return refuse(403, 'bad signature');
    const keys = parseKeys(body);
    if (keys === null) return refuse(400, 'want {"keys": [string, ...]}');
    drop(keys);
    res.writeHead(204).end();
  });
}

function parseKeys(body: Buffer): string[] | null {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { keys?: unknown };
    return Array.isArray(parsed.keys) && parsed.keys.every((k) => typeof k === 'string') ? (parsed.keys as string[]) : null;
  } catch {
    return null;
  }
}

class StaleConnectionError extends Error {
  constructor(cause: Error) {
    super(`a kept-alive connection was closed as it was reused: ${cause.message}`, { cause });
    this.name = 'StaleConnectionError';
  }
}

/** Sends invalidations: kept-alive connections to every member, each request bounded in time. */
export class InvalidationSender {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 8 });

  constructor(
    private readonly key: Buffer,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Resolves once `url` acknowledged the drop of `keys`; rejects on any other outcome. A kept-alive
   * connection the listener closed as it was reused fails at once: that one is retried on a new
   * connection (Node's advice for `reusedSocket`), since a failure here costs the write a lease.
   */
  async send(url: string, keys: string[]): Promise<void> {
    const body = Buffer.from(JSON.stringify({ keys }));
    try {
      await this.#post(url, body);
    } catch (err) {
      if (!(err instanceof StaleConnectionError)) throw err;
      await this.#post(url, body);
    }
  }

  #post(url: string, body: Buffer): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const req = request(
        `${url}/invalidate`,
        {
          method: 'POST',
          agent: this.#agent,
          headers: { 'content-type': 'application/json', 'content-length': String(body.length), [SIGNATURE_HEADER]: sign(this.key, body) },
          timeout: this.timeoutMs,
        },
        (res) => {
          res.resume();
          if (res.statusCode === 204) resolve();
          else reject(new Error(`peer ${url} answered ${res.statusCode ?? 0} to an invalidation`));
        },
      );
      // `timeout` is idleness; the whole exchange is bounded too.
      const deadline = setTimeout(() => req.destroy(new Error(`peer ${url} did not acknowledge within ${this.timeoutMs} ms`)), this.timeoutMs);
      deadline.unref();
      req.once('close', () => clearTimeout(deadline));
      req.once('timeout', () => req.destroy(new Error(`peer ${url} did not acknowledge within ${this.timeoutMs} ms`)));
      req.once('error', (err: NodeJS.ErrnoException) => {
        const stale = req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE');
        reject(stale ? new StaleConnectionError(err) : err);
      });
      req.end(body);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}
