/**
 * The event bus of the server: `emit` turns a committed write into one durable outbox document
 * per matching webhook target (before the write's response goes out), and hands it to the
 * dispatcher. `start` resumes what a previous run left in the outbox.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { IndexConfig } from '../config/types.js';
import type { MetaStore } from '../storage/types.js';
import { Dispatcher } from './dispatcher.js';
import { Outbox } from './outbox.js';
import { payloadBody } from './payload.js';
import { matchingTargets, urlHash } from './targets.js';
import type { EventSink, StoredDelivery, WriteEvent } from './types.js';

export class EventBus implements EventSink {
  readonly #outbox: Outbox;
  readonly #dispatcher: Dispatcher;

  constructor(
    meta: MetaStore,
    private readonly byName: ReadonlyMap<string, IndexConfig>,
    private readonly log: FastifyBaseLogger,
  ) {
    this.#outbox = new Outbox(meta);
    this.#dispatcher = new Dispatcher({ outbox: this.#outbox, byName, log });
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

  /** Loads the pending deliveries of earlier runs and starts sending. */
  async start(): Promise<void> {
    let resumed = 0;
    for await (const d of this.#outbox.pending()) {
      this.#dispatcher.schedule(d.id, d.nextAttemptAt);
      resumed++;
    }
    if (resumed > 0) this.log.info({ deliveries: resumed }, 'webhook deliveries resumed from the outbox');
    this.#dispatcher.run();
  }

  async close(): Promise<void> {
    await this.#dispatcher.close();
  }
}
