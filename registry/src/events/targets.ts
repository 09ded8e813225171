/**
 * Which `[[index.webhook]]` targets an event goes to: those of the index the request came
 * through, and, when the write landed in another index (a virtual route's upload target), those
 * of that index too, so a hosted index's subscribers hear of every change to it whichever route
 * carried the write. The `events` filter of each target applies; its default is every event.
 */
import { createHash } from 'node:crypto';
import type { IndexConfig, WebhookConfig } from '../config/types.js';
import type { StoredDelivery, WriteEvent } from './types.js';

export interface TargetRef {
  owner: string;
  position: number;
  webhook: WebhookConfig;
}

export function matchingTargets(e: WriteEvent, byName: ReadonlyMap<string, IndexConfig>): TargetRef[] {
  const owners = e.localIndex === e.index ? [e.index] : [e.index, e.localIndex];
  const found: TargetRef[] = [];
  for (const owner of owners) {
    (byName.get(owner)?.webhooks ?? []).forEach((webhook, position) => {
      if (!webhook.events || webhook.events.includes(e.event)) found.push({ owner, position, webhook });
    });
  }
  return found;
}

export function urlHash(url: string): string {
  return createHash('sha256').update(url).digest('hex');
}

/** The configured target of a stored delivery, or null when the config no longer has it. */
export function resolveTarget(d: StoredDelivery, byName: ReadonlyMap<string, IndexConfig>): WebhookConfig | null {
  const hooks = byName.get(d.owner)?.webhooks ?? [];
  const atPosition = hooks[d.target];
  if (atPosition && urlHash(atPosition.url) === d.urlHash) return atPosition;
  // The list was reordered between restarts: the same URL elsewhere in it is the same receiver.
  return hooks.find((w) => urlHash(w.url) === d.urlHash) ?? null;
}
