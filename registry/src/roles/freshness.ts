/**
 * When a cached document (a page, a tag list, a manifest by tag) must be revalidated upstream.
 * The TTL is the index's `cache_ttl_secs`, shortened by the upstream's own `Cache-Control`
 * (`s-maxage` wins over `max-age`, as for any shared cache, less the `Age` already spent
 * elsewhere), and zero for `no-cache`/`no-store`: then every read revalidates.
 */
import type { Sha256Hex } from '../storage/types.js';

export const DEFAULT_CACHE_TTL_SECS = 300;

/** The stored record of a cached document; the bytes are a blob in the BlobStore. */
export interface CachedDoc {
  /** When the upstream last confirmed this content, ms since the epoch. */
  fetchedAt: number;
  ttlSecs: number;
  etag?: string;
  lastModified?: string;
  digest: Sha256Hex;
  size: number;
  contentType?: string;
  /**
   * Which of the index's upstreams sent the content (as `displayUrl` shows it), when it has
   * several: its validators are sent to that one only, and relative links resolve against it.
   * Absent: the first (every record written before an index had several).
   */
  upstream?: string;
  /**
   * `upstream_deletions = "keep"`: when the upstream first answered that it no longer has this
   * document (ms since the epoch); the stored copy is served on, marked so, until the upstream
   * has it again. Absent: the upstream has it.
   */
  keptSince?: number;
}

/** The upstream headers that decide freshness and revalidation. */
export interface FreshnessHeaders {
  cacheControl?: string;
  age?: string;
  etag?: string;
  lastModified?: string;
  contentType?: string;
}

export type Freshness = 'fresh' | 'revalidate';

export function freshness(doc: Pick<CachedDoc, 'fetchedAt' | 'ttlSecs'>, now: number): Freshness {
  return now < doc.fetchedAt + doc.ttlSecs * 1000 ? 'fresh' : 'revalidate';
}

/** The TTL of a response: min(index TTL, upstream max-age), 0 when the upstream forbids reuse. */
export function ttlSecs(indexTtlSecs: number, headers: Pick<FreshnessHeaders, 'cacheControl' | 'age'>): number {
  const directives = parseCacheControl(headers.cacheControl ?? '');
  if (directives.has('no-store') || directives.has('no-cache')) return 0;
  const maxAge = seconds(directives.get('s-maxage')) ?? seconds(directives.get('max-age'));
  if (maxAge === undefined) return indexTtlSecs;
  const age = seconds(headers.age) ?? 0;
  return Math.min(indexTtlSecs, Math.max(0, maxAge - age));
}

function parseCacheControl(value: string): Map<string, string | undefined> {
  const out = new Map<string, string | undefined>();
  for (const part of value.split(',')) {
    const [rawName, ...rest] = part.split('=');
    const name = rawName?.trim().toLowerCase();
    if (!name) continue;
    const v = rest.length > 0 ? rest.join('=').trim().replace(/^"(.*)"$/, '$1') : undefined;
    out.set(name, v);
  }
  return out;
}

function seconds(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d+$/.test(value.trim())) return undefined;
  return Number(value.trim());
}

/** The record after a 304: the same content, confirmed now, with any validators the 304 updated. */
export function confirmed(doc: CachedDoc, headers: FreshnessHeaders, indexTtlSecs: number, now: number): CachedDoc {
  // The upstream has it (again): a copy kept after its delete is no longer marked.
  const { keptSince: _kept, ...rest } = doc;
  return {
    ...rest,
    fetchedAt: now,
    ttlSecs: ttlSecs(indexTtlSecs, headers),
    etag: headers.etag ?? doc.etag,
    lastModified: headers.lastModified ?? doc.lastModified,
  };
}

/** The record of content just fetched with a 200. */
export function fetched(
  blob: { digest: Sha256Hex; size: number },
  headers: FreshnessHeaders,
  indexTtlSecs: number,
  now: number,
): CachedDoc {
  const doc: CachedDoc = { fetchedAt: now, ttlSecs: ttlSecs(indexTtlSecs, headers), digest: blob.digest, size: blob.size };
  if (headers.etag !== undefined) doc.etag = headers.etag;
  if (headers.lastModified !== undefined) doc.lastModified = headers.lastModified;
  if (headers.contentType !== undefined) doc.contentType = headers.contentType;
  return doc;
}
