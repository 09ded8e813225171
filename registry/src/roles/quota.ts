/**
 * Quotas of hosted indexes (`quota_bytes`): a write that would make an index hold more than its
 * quota is refused before its bytes are stored, with a message that says what it holds, what the
 * write adds and how to make room. Each ecosystem turns the refusal into its own error (Python:
 * 413 with the reason; OCI: `DENIED`) and counts it (`quota_refused`).
 *
 * What an index holds is the usage ledger's figure (lifecycle/usage/): this process's own
 * writes at once, every other process's within a flush interval. Writes running at the same time
 * each see the figure without the others, so together they can go over the quota by what they
 * add at once; the next write after them is refused. Bytes of a failed or abandoned upload are
 * never held, so they never count.
 */
import { formatSize } from '../config/size.js';
import type { IndexConfig } from '../config/types.js';
import type { UsageFigures } from '../lifecycle/usage/ledger.js';

export class QuotaExceededError extends Error {
  constructor(
    readonly index: string,
    readonly quotaBytes: number,
    readonly heldBytes: number,
    readonly addingBytes: number,
  ) {
    super(
      `index "${index}" is over its quota: it holds ${formatSize(heldBytes)} of its quota_bytes ${formatSize(quotaBytes)}` +
        (addingBytes > 0 ? ` and this upload adds ${formatSize(addingBytes)}` : '') +
        '; delete what it no longer needs (the bytes are freed by the next garbage collection) or raise quota_bytes',
    );
    this.name = 'QuotaExceededError';
  }
}

export interface QuotaUsage {
  usage(index: string): UsageFigures;
}

/**
 * Throws `QuotaExceededError` when `index` (a hosted index with a quota) holding `addingBytes`
 * more would cross its quota. Bytes the index holds already add nothing: pass 0.
 */
export function checkQuota(usage: QuotaUsage, index: IndexConfig, addingBytes: number): void {
  if (index.role !== 'hosted' || index.quotaBytes === undefined || addingBytes <= 0) return;
  const held = usage.usage(index.name).bytes;
  if (held + addingBytes > index.quotaBytes) throw new QuotaExceededError(index.name, index.quotaBytes, held, addingBytes);
}

/** Throws `QuotaExceededError` when `index` is full already: the check before a body is read. */
export function checkRoom(usage: QuotaUsage, index: IndexConfig): void {
  if (index.role !== 'hosted' || index.quotaBytes === undefined) return;
  const held = usage.usage(index.name).bytes;
  if (held >= index.quotaBytes) throw new QuotaExceededError(index.name, index.quotaBytes, held, 0);
}
