/**
 * The rate-limit class of a `/v2/` request, from its method and the path segments after `v2`
 * alone (nothing is read or resolved): blob GET/HEAD is `download`; the other reads (the `/v2/`
 * ping, manifests, tags, referrers, the catalog, layer contents) are `read`; every verb that
 * changes something, and the upload-status GET (a step of a push), is `write`. The action sits at
 * the end of the path, as in `handlers/url.ts`, because `<name>` has slashes.
 */
import type { RateClassName } from '../config/types.js';
import { errorPayload } from './model/errors.js';

export function classifyOci(method: string, segs: readonly string[]): RateClassName {
  if (method !== 'GET' && method !== 'HEAD') return 'write';
  const n = segs.length;
  if (n >= 4 && segs[n - 3] === 'blobs' && segs[n - 2] === 'uploads') return 'write';
  if (n >= 3 && segs[n - 2] === 'blobs' && segs[n - 1] !== 'uploads') return 'download';
  return 'read';
}

/** The 429 body in the distribution spec's error shape. */
export function ociTooManyRequests(message: string): string {
  return errorPayload('TOOMANYREQUESTS', message);
}
