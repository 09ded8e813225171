/**
 * Fetches one small upstream document (a page, a tag list, a manifest) for `DocCache`: a
 * conditional GET, the body read into memory up to a bound, and the answer sorted into
 * not-modified, ok, absent (404/410) or a thrown `UpstreamError` (any other status is `status`,
 * 5xx included; a body over the bound is `too_large`).
 */
import type { FreshnessHeaders } from './freshness.js';
import { discard, header, readBounded, type UpstreamClient, type UpstreamResponse } from './upstream.js';
import { UpstreamError } from './upstream-error.js';

export const DEFAULT_MAX_DOC_BYTES = 64 * 1024 * 1024;

export type FetchedDoc =
  | { status: 'not_modified'; headers: FreshnessHeaders }
  | { status: 'ok'; body: Buffer; headers: FreshnessHeaders; upstream?: string }
  | { status: 'absent'; code: number };

/** The validators a revalidation sends. */
export interface Conditional {
  etag?: string;
  lastModified?: string;
  /** The upstream the validators belong to (`CachedDoc.upstream`): no other is sent them. */
  upstream?: string;
}

export interface FetchDocOptions {
  headers?: Record<string, string>;
  maxBytes?: number;
  signal?: AbortSignal;
}

export async function fetchDoc(client: UpstreamClient, target: string | URL, cond: Conditional, opts: FetchDocOptions = {}): Promise<FetchedDoc> {
  const req: Parameters<UpstreamClient['get']>[1] = { headers: opts.headers ?? {} };
  if (cond.etag !== undefined) req.etag = cond.etag;
  if (cond.lastModified !== undefined) req.lastModified = cond.lastModified;
  if (opts.signal) req.signal = opts.signal;
  const res = await client.get(target, req);
  if (res.status === 304) {
    discard(res);
    return { status: 'not_modified', headers: freshnessHeaders(res) };
  }
  if (res.status === 404 || res.status === 410) {
    discard(res);
    return { status: 'absent', code: res.status };
  }
  if (res.status !== 200) {
    discard(res);
    // The upstream answered, but not with something a cache can use.
    throw new UpstreamError('status', null, `upstream ${res.url} answered ${res.status}`, { status: res.status, shownUrl: res.url });
  }
  const body = await readBounded(res, opts.maxBytes ?? DEFAULT_MAX_DOC_BYTES);
  return { status: 'ok', body, headers: freshnessHeaders(res) };
}

export function freshnessHeaders(res: Pick<UpstreamResponse, 'headers'>): FreshnessHeaders {
  const out: FreshnessHeaders = {};
  const set = (k: keyof FreshnessHeaders, name: string): void => {
    const v = header(res.headers, name);
    if (v !== undefined) out[k] = v;
  };
  set('cacheControl', 'cache-control');
  set('age', 'age');
  set('etag', 'etag');
  set('lastModified', 'last-modified');
  set('contentType', 'content-type');
  return out;
}
