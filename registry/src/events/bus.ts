/**
 * The event bus of the server: `emit` turns a committed write into one durable outbox document
 * per matching webhook target (before the write's response goes out), and hands it to the
 * dispatcher. `start` resumes what a previous run left in the outbox. On a shared store the
 * outbox is also listed again every `RESCAN_MS`, so that deliveries written by other processes
 * (one that died with them, or that is busy) are seen here too; the lease in each document
 * (outbox.ts) makes sure only one process sends each.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { IndexConfig } from '../config/types.js';
import type { MetaStore } from '../storage/types.js';
import { Dispatcher } from './dispatcher.js';
import { Outbox } from './outbox.js';
import { payloadBody } from './payload.js';
import { matchingTargets, urlHash } from './targets.js';
import type { EventSink, StoredDelivery, WriteEvent } from './types.js';

/** How often a process on a shared store lists the outbox for deliveries it does not know. */
export const RESCAN_MS = 10_000;

export interface EventBusOptions {
  /** Other processes share the store (`Stores.shared`): rescan the outbox periodically. */
  shared: boolean;
}

export class EventBus implements EventSink {
  readonly #outbox: Outbox;
  readonly #dispatcher: Dispatcher;
  readonly #shared: boolean;
  /** This process's name in delivery leases. */
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  #rescan: NodeJS.Timeout | undefined;

  constructor(
    meta: MetaStore,
    private readonly byName: ReadonlyMap<string, IndexConfig>,
    private readonly log: FastifyBaseLogger,
    opts: EventBusOptions = { shared: false },
  ) {
    this.#outbox = new Outbox(meta);
    this.#shared = opts.shared;
    this.#dispatcher = new Dispatcher({ outbox: this.#outbox, byName, log, owner: this.owner, shared: opts.shared });
  }

  /**
   * Never throws: the write it reports has already committed, so failing the response would only
   * invite a retry that changes nothing. A delivery that cannot be stored is logged as lost.
   */
  async emit(e: WriteEvent): Promise<void> {
    const targets = matchingTargets(e, this.byName);
    if (targets.length === 0) return;
    const created = new Date();
    const body = payloadBody(e, created);
    for (const t of targets) {
      const d: StoredDelivery = {
        id: randomUUID(),
        event: e.event,
        owner: t.owner,
        target: t.position,
        urlHash: urlHash(t.webhook.url),
        body,
        createdAt: created.getTime(),
        attempts: 0,
        nextAttemptAt: created.getTime(),
      };
      try {
        await this.#outbox.add(d);
        this.#dispatcher.schedule(d.id, d.nextAttemptAt);
      } catch (err) {
        this.log.error(
          { delivery: d.id, event: e.event, index: t.owner, error: err instanceof Error ? err.message : 'unknown error' },
          'webhook delivery could not be stored; it is lost',
        );
      }
    }
  }

  /** Loads the pending deliveries of earlier runs (or of other processes) and starts sending. */
  async start(): Promise<void> {
    const resumed = await this.#scan();
    if (resumed > 0) this.log.info({ deliveries: resumed }, 'webhook deliveries resumed from the outbox');
    this.#dispatcher.run();
    if (this.#shared) this.#armRescan();
  }

  async close(): Promise<void> {
    clearTimeout(this.#rescan);
    this.#rescan = undefined;
    await this.#dispatcher.close();
  }

  /** Schedules every pending delivery this process does not know yet; its claim checks when it is due. */
  async #scan(): Promise<number> {
    let found = 0;
    for await (const id of this.#outbox.pendingIds()) {
      if (this.#dispatcher.knows(id)) continue;
      this.#dispatcher.schedule(id, Date.now());
      found++;
    }
    return found;
  }

  #armRescan(): void {
    this.#rescan = setTimeout(() => {
      this.#scan()
        .then((found) => {
          if (found > 0) this.log.info({ deliveries: found }, 'webhook deliveries of other processes found in the outbox');
        })
        .catch((err: unknown) => this.log.warn({ error: err instanceof Error ? err.message : 'unknown error' }, 'webhook outbox not listed; trying again later'))
        .finally(() => {
          if (this.#rescan !== undefined) this.#armRescan();
        });
    }, RESCAN_MS);
    this.#rescan.unref();
  }
}
