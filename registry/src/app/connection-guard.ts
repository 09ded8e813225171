/**
 * The bounds on slow and greedy clients (`[connections]`, docs/operations.md "Slow clients"):
 *
 * - headers: Node's `headersTimeout`; a head that has not finished in time gets fastify's 408 and
 *   the connection closes. Node looks every `connectionsCheckingInterval`, a quarter of the bound
 *   here, so the cut comes within 1.25 × the bound.
 * - body: a body that delivers nothing for the idle bound is cut (`http/body-progress.ts`): a 408
 *   when nothing was answered yet, then the connection closes. There is no total request timeout
 *   (`requestTimeout` 0): a multi-gigabyte upload that keeps moving is never cut.
 * - keep-alive: an idle kept-alive connection closes after `keepAliveTimeout`.
 * - connections per client address (optional): the one past the cap is answered 429 with
 *   `Connection: close` on its first request, and closed without one if that request is slow to
 *   come. The address is the socket's peer; trusted proxies are exempt (all their clients share
 *   their address, and their pooled connections are not one client's).
 *
 * Every cut or refusal writes a security-log line (`observe/security-log.ts`).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import type { ConnectionsConfig } from '../config/connections.js';
import type { ClientAddress } from '../limits/client-address.js';
import { ConnectionCap } from '../limits/connection-cap.js';
import { logConnectionCut, logConnectionRefused } from '../observe/security-log.js';
import { announcesBody, watchBodyProgress } from '../http/body-progress.js';
import { DROP_AFTER_REFUSAL, discardRest } from '../http/discard-body.js';
import { errorBody, reasonPhrase } from '../http/errors.js';

export interface GuardOptions {
  connections: ConnectionsConfig;
  addresses: ClientAddress;
  /** The client of a request (trusted proxies resolved), for the security log. */
  clientAddress: (request: FastifyRequest) => string;
  /** The 429 body of a refused connection's request, in the error shape of the route it asked for. */
  tooManyBody: (request: FastifyRequest, message: string) => string | object;
}

/** The longest a connection past the cap waits for its first request before it is closed without an answer. */
const REFUSED_CONNECTION_GRACE_MS = 5_000;

/** The options of fastify and of its Node server that carry the bounds Node enforces itself. */
export function serverTimeouts(c: ConnectionsConfig): { keepAliveTimeout: number; requestTimeout: number; http: ServerOptions } {
  return {
    keepAliveTimeout: c.keepAliveTimeoutMs,
    // No bound on a whole request: the body's idle watch stands in for it.
    requestTimeout: 0,
    http: { headersTimeout: c.headersTimeoutMs, connectionsCheckingInterval: Math.max(250, Math.floor(c.headersTimeoutMs / 4)) },
  };
}

/** Installs what Node does not enforce itself; the app must have been built with `serverTimeouts`. */
export function guardConnections(app: FastifyInstance, opts: GuardOptions): void {
  const { connections: c, addresses } = opts;
  const server = app.server;

  // Before fastify's own handler, which answers 408 and destroys the socket.
  server.prependListener('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    // A connection that sent nothing at all (a probe, a browser's spare) is no attack worth a line.
    if (err.code !== 'ERR_HTTP_REQUEST_TIMEOUT' || socket.bytesRead === 0) return;
    logConnectionCut(app.log, { reason: 'headers_timeout', client: addresses.peerOf(socket), afterSecs: c.headersTimeoutMs / 1000 });
  });

  const refused = c.maxPerClient > 0 ? capConnections(app, opts) : null;

  const idleSecs = c.bodyIdleTimeoutMs / 1000;
  const stalledBody = JSON.stringify(errorBody(408, `the request body sent nothing for ${idleSecs} s; the connection is closed`));
  const stalledAnswer = `HTTP/1.1 408 ${reasonPhrase(408)}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(stalledBody)}\r\n\r\n${stalledBody}`;

  // Callback style: the common request (no body, under the cap) costs no promise.
  app.addHook('onRequest', (request, reply, done) => {
    const raw = request.raw;
    if (refused?.has(raw.socket)) {
      const message = `too many connections from one address: at most ${c.maxPerClient} at once; reuse a kept-alive connection, or retry once one has closed`;
      reply.header('connection', 'close').header('retry-after', '1');
      if (announcesBody(raw)) discardRest(raw, DROP_AFTER_REFUSAL);
      void reply.code(429).type('application/json').send(opts.tooManyBody(request, message));
      return;
    }
    if (announcesBody(raw) && !raw.complete) {
      watchBodyProgress(raw, c.bodyIdleTimeoutMs, () => {
        logConnectionCut(request.log, { reason: 'body_stalled', client: opts.clientAddress(request), method: request.method, afterSecs: idleSecs });
        const socket = raw.socket;
        // Written straight to the socket, as Node answers a timed-out head: whatever the handler
        // still does with the reply finds the connection gone.
        if (!reply.raw.headersSent && socket.writable) socket.write(stalledAnswer);
        socket.destroy();
      });
    }
    done();
  });
}

/**
 * Counts each accepted connection against its peer's address; a connection past the cap is
 * marked (the returned set) for the `onRequest` hook to refuse, and closed after a short grace.
 */
function capConnections(app: FastifyInstance, opts: GuardOptions): WeakSet<Socket> {
  const { connections: c, addresses } = opts;
  const cap = new ConnectionCap(c.maxPerClient);
  const refused = new WeakSet<Socket>();
  const grace = Math.min(REFUSED_CONNECTION_GRACE_MS, c.headersTimeoutMs);
  // Over TLS a request's socket is the TLS socket, not the TCP one under it: count that one.
  app.server.on(app.server instanceof TlsServer ? 'secureConnection' : 'connection', (socket: Socket) => {
    if (socket.remoteAddress === undefined || addresses.fromTrustedProxy(socket)) return;
    const peer = addresses.peerOf(socket);
    if (cap.take(peer)) {
      socket.once('close', () => cap.release(peer));
      return;
    }
    refused.add(socket);
    logConnectionRefused(app.log, { client: peer, limit: c.maxPerClient });
    setTimeout(() => socket.destroy(), grace).unref();
  });
  return refused;
}
