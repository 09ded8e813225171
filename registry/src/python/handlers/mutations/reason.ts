/**
 * The optional yank reason: the `reason` query parameter, or the request body, either JSON
 * `{"reason": "..."}` or plain text. Bodies are small; anything larger is refused.
 */
import type { IndexRequest } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { readSmallBody } from '../../../http/small-body.js';

const MAX_BODY = 4096;

export async function yankReason(req: IndexRequest): Promise<string> {
  const fromQuery = req.query.get('reason');
  const body = await readSmallBody(req.request.raw, MAX_BODY, 'a yank reason is a short text');
  if (fromQuery !== null) return clean(fromQuery);
  if (body.trim() === '') return '';
  const type = String(req.request.headers['content-type'] ?? '').toLowerCase();
  if (type.includes('json') || body.trimStart().startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      throw new HttpError(400, 'the body is not valid JSON; send {"reason": "..."} or plain text');
    }
    const reason = (parsed as { reason?: unknown } | null)?.reason;
    if (reason !== undefined && typeof reason !== 'string') throw new HttpError(400, '"reason" must be a string');
    return clean(reason ?? '');
  }
  return clean(body);
}

/** One line, no control characters: it ends up in HTML attributes and JSON. */
function clean(reason: string): string {
  return [...reason].map((c) => (c.charCodeAt(0) < 0x20 || c === '\u007f' ? ' ' : c)).join('').replace(/ +/g, ' ').trim();
}
