/**
 * The quota of a hosted Python index (roles/quota.ts) at an upload: a 413 whose JSON body names
 * the quota (`reason: "quota"`), and whose status line carries the message (twine prints that),
 * before any byte is stored; counted as `quota_refused`. The identical file uploaded again adds
 * nothing and is never refused.
 */
import type { FastifyRequest } from 'fastify';
import type { IndexConfig } from '../../../config/types.js';
import { errorBody, HttpError } from '../../../http/errors.js';
import type { UsageCounters } from '../../../observe/counters.js';
import type { MetaStore } from '../../../storage/types.js';
import { ProjectRecords } from '../../model/records.js';
import { checkQuota, checkRoom, QuotaExceededError, type QuotaUsage } from '../../../roles/quota.js';

export interface QuotaServices {
  usage: QuotaUsage;
  counters: UsageCounters;
  stores: { meta: MetaStore };
}

/** Before the form is read: refused when the index is full already. */
export function ensureRoom(services: QuotaServices, target: IndexConfig, request: FastifyRequest): void {
  refused(services, target, request, () => checkRoom(services.usage, target));
}

/** Before `filename` (`bytes` with its metadata) is held and stored; a file the project has already adds nothing. */
export async function ensureQuota(services: QuotaServices, target: IndexConfig, request: FastifyRequest, project: string, filename: string, bytes: number): Promise<void> {
  if (target.role !== 'hosted' || target.quotaBytes === undefined) return;
  const known = (await new ProjectRecords(services.stores.meta).get(target.name, project))?.record.files[filename];
  if (known !== undefined) return;
  refused(services, target, request, () => checkQuota(services.usage, target, bytes));
}

function refused(services: QuotaServices, target: IndexConfig, request: FastifyRequest, check: () => void): void {
  try {
    check();
  } catch (err) {
    if (!(err instanceof QuotaExceededError)) throw err;
    services.counters.index(target.route).add('quota_refused');
    request.log.info({ index: target.name, quota: err.quotaBytes, held: err.heldBytes, adding: err.addingBytes }, 'upload refused: over the index quota');
    throw new HttpError(413, err.message, {}, {
      ...errorBody(413, err.message),
      reason: 'quota',
      quota: { index: err.index, quota_bytes: err.quotaBytes, held_bytes: err.heldBytes, adding_bytes: err.addingBytes },
    });
  }
}
