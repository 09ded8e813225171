/** The JSON body of a delivery, in the field names of the spec. */
import type { WriteEvent } from './types.js';

export function payloadBody(e: WriteEvent, createdAt: Date): string {
  const doc: Record<string, unknown> = {
    event: e.event,
    created_at: createdAt.toISOString(),
    index: e.index,
    route: e.route,
    local_index: e.localIndex,
    project: e.project,
    count: e.count,
  };
  if (e.version !== undefined) doc.version = e.version;
  if (e.file) doc.file = { filename: e.file.filename, sha256: e.file.sha256 };
  if (e.actor) doc.actor = e.actor;
  if (e.requestId) doc.request_id = e.requestId;
  return JSON.stringify(doc);
}
