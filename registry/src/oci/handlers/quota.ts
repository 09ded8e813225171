/**
 * The quota of a hosted OCI index (roles/quota.ts) at each way a push stores bytes: refused with
 * `DENIED` (403) and the quota's message before the bytes are stored, and counted
 * (`quota_refused`). A digest the index holds already adds nothing, so a push repeated or
 * mounted within the index is never refused.
 */
import type { IndexConfig } from '../../config/types.js';
import { checkQuota, checkRoom, QuotaExceededError } from '../../roles/quota.js';
import { OciError } from '../model/errors.js';
import { heldInIndex } from '../read/index-holds.js';
import type { OciCall } from './exchange.js';

/** Before a body is read: refused when the index is full already. */
export function ensureRoom(call: OciCall, hosted: IndexConfig): void {
  denied(call, hosted, () => checkRoom(call.deps.usage, hosted));
}

/** Before `size` bytes of `hex` (null: not known yet) are held and stored for the index. */
export async function ensureQuota(call: OciCall, hosted: IndexConfig, hex: string | null, size: number): Promise<void> {
  if (hosted.role !== 'hosted' || hosted.quotaBytes === undefined) return;
  const adding = hex !== null && heldInIndex(await call.deps.holds.holders(hex), hosted) ? 0 : size;
  denied(call, hosted, () => checkQuota(call.deps.usage, hosted, adding));
}

function denied(call: OciCall, hosted: IndexConfig, check: () => void): void {
  try {
    check();
  } catch (err) {
    if (!(err instanceof QuotaExceededError)) throw err;
    call.deps.counters.index(hosted.route).add('quota_refused');
    call.request.log.info({ index: hosted.name, quota: err.quotaBytes, held: err.heldBytes, adding: err.addingBytes }, 'upload refused: over the index quota');
    throw new OciError('DENIED', err.message);
  }
}
