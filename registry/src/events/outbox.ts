/**
 * The durable outbox: one MetaStore document per pending delivery under `events/outbox/<id>`,
 * and the deliveries that were given up under `events/dead/<id>` (kept for inspection).
 */
import type { MetaStore } from '../storage/types.js';
import type { StoredDelivery } from './types.js';

const OUTBOX = 'events/outbox';
const DEAD = 'events/dead';

export class Outbox {
  constructor(private readonly meta: MetaStore) {}

  async add(d: StoredDelivery): Promise<void> {
    await this.meta.put(`${OUTBOX}/${d.id}`, d, null);
  }

  async get(id: string): Promise<StoredDelivery | null> {
    return (await this.meta.get<StoredDelivery>(`${OUTBOX}/${id}`))?.doc ?? null;
  }

  async save(d: StoredDelivery): Promise<void> {
    await this.meta.put(`${OUTBOX}/${d.id}`, d);
  }

  async remove(id: string): Promise<void> {
    await this.meta.delete(`${OUTBOX}/${id}`);
  }

  /** Moves a delivery to the dead letters: written there first, so a crash never loses it. */
  async bury(d: StoredDelivery): Promise<void> {
    await this.meta.put(`${DEAD}/${d.id}`, d);
    await this.remove(d.id);
  }

  async *pending(): AsyncIterable<StoredDelivery> {
    for await (const key of this.meta.list(OUTBOX)) {
      const found = await this.meta.get<StoredDelivery>(key);
      if (found) yield found.doc;
    }
  }
}
