/**
 * Small HTTP(S) servers of the tests' own that stand for what velodex must not trust: a hostile
 * upstream, the CDN a redirect leads to, a token realm, an internal service on another loopback
 * address standing for the metadata address. Each records every request it gets (method, path,
 * whether credentials came with it) and is answered by the test's handler. These are fakes by
 * design: no real server misbehaves on purpose.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';

export interface Seen {
  method: string;
  path: string;
  /** The Authorization header, if the request carried one. */
  authorization?: string;
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

export interface HostileServer {
  /** `http(s)://<host>:<port>` */
  url: string;
  host: string;
  port: number;
  requests: Seen[];
  close(): Promise<void>;
}

export interface HostileOptions {
  /** The loopback address to listen on (127.0.0.1 by default; 127.0.0.2 stands for "another host"). */
  host?: string;
  /** Serve https with this key and certificate (`testCertificates`, support/certificates.ts). */
  tls?: { key: Buffer; cert: Buffer };
}

export async function startHostile(handler: Handler, opts: HostileOptions = {}): Promise<HostileServer> {
  const host = opts.host ?? '127.0.0.1';
  const requests: Seen[] = [];
  const sockets = new Set<Socket>();
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    requests.push({ method: req.method ?? '', path: req.url ?? '', ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
    Promise.resolve(handler(req, res)).catch(() => res.destroy());
  };
  const server = opts.tls ? https.createServer({ key: opts.tls.key, cert: opts.tls.cert }, onRequest) : http.createServer(onRequest);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${opts.tls ? 'https' : 'http'}://${host}:${port}`,
    host,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * Writes `chunk` over and over until the client stops reading (or `max` bytes went out), and
 * resolves with the bytes written: what a client that reads an answer whole would have taken in.
 * No Content-Length, so the client cannot see the size coming.
 */
export function endlessBody(res: ServerResponse, status: number, contentType: string, first: string, max = 512 * 1024 * 1024): Promise<number> {
  return new Promise((resolve) => {
    res.writeHead(status, { 'content-type': contentType });
    let written = 0;
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const done = (): void => resolve(written);
    res.on('close', done);
    const pump = (): void => {
      if (written === 0) {
        res.write(first);
        written += first.length;
      }
      while (written < max && !res.destroyed) {
        written += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
      if (written >= max) res.end();
    };
    pump();
  });
}
