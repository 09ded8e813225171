/**
 * Stopping without cutting a kept-alive connection that a client is about to reuse.
 *
 * Behind a Kubernetes Service a client's kept-alive connection still leads to a stopping pod after
 * its endpoint was withdrawn (conntrack keeps it). Closing such a connection while it is idle races
 * the client's next request on it: a client that wrote its request just before the close reads
 * "other side closed". So a stop first drains:
 * - from `begin()` on, every response says `Connection: close`, and its connection ends after it:
 *   the client's next request opens a new connection, to a pod that stays;
 * - `settle(graceMs)` waits until every connection has ended so, or until `graceMs` passed
 *   (`[connections] drain_secs`, 1 s by default). Only a connection that stayed idle all that time
 *   is then closed while idle (fastify's close), and a client is unlikely to pick that very moment
 *   to reuse it.
 */
import type { Server } from 'node:net';

const POLL_MS = 20;

export class ConnectionDrain {
  #closing = false;

  constructor(private readonly server: Server) {}

  /** True from `begin()` on: responses end their connections. */
  get closing(): boolean {
    return this.#closing;
  }

  begin(): void {
    this.#closing = true;
  }

  /** Begins, then resolves once no connection is open, or after `graceMs`. */
  async settle(graceMs: number): Promise<void> {
    this.begin();
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline && (await this.#open()) > 0) await new Promise((r) => setTimeout(r, POLL_MS));
  }

  #open(): Promise<number> {
    return new Promise((resolve) => {
      // A server that is not listening (never was, or closed already) has nothing to wait for.
      if (!this.server.listening) return resolve(0);
      this.server.getConnections((err, count) => resolve(err ? 0 : count));
    });
  }
}
