/**
 * PEP 792 project status as a gate on writes that add files (upload, promote). A route's status
 * of a project is the one its Simple page shows: from an upstream member's page (JSON
 * `project-status` or the HTML `pypi:project-status` meta), unless a hosted member shadows the
 * project. `archived` and `quarantined` take no new files (PEP 792: archived projects expect no
 * updates, quarantined ones are unsafe to install); `active` and `deprecated` do.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { IndexConfig } from '../../config/types.js';
import { HttpError } from '../../http/errors.js';
import type { SourceLookup } from './source/types.js';

export const STATUSES_REJECTING_WRITES: ReadonlySet<string> = new Set(['archived', 'quarantined']);

const WHY: Record<string, string> = {
  archived: 'an archived project expects no new releases',
  quarantined: 'a quarantined project is considered unsafe and takes no new files',
};

/** Throws 403 when `normalized` has a status on route `index` that rejects new files. */
export type WriteStatusCheck = (index: IndexConfig, normalized: string, log: FastifyBaseLogger) => Promise<void>;

export function writeStatusCheck(lookup: SourceLookup): WriteStatusCheck {
  return async (index, normalized, log) => {
    const source = lookup(index.name);
    if (!source) return;
    let status: { status: string; reason?: string } | undefined;
    try {
      status = (await (await source.project(normalized))?.resolve())?.status;
    } catch (err) {
      // An upstream that is down with nothing cached: the status is unknown, and the write is not
      // held hostage to it (the upload target's own checks still apply).
      log.warn({ index: index.route, project: normalized, reason: err instanceof Error ? err.message : String(err) }, 'project status unknown; write allowed');
      return;
    }
    const value = status?.status.toLowerCase();
    if (value === undefined || !STATUSES_REJECTING_WRITES.has(value)) return;
    const reason = status?.reason ? ` (reason given: ${status.reason})` : '';
    throw new HttpError(
      403,
      `project "${normalized}" has project status "${value}" on ${index.route}${reason}, and ${WHY[value]}: ` +
        'velodex refuses new files for it. Publish under another project name, or have the status lifted on the index that set it.',
    );
  };
}
