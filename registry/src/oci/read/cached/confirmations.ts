/**
 * Until when the upstream's answer about a tag of a cached index holds: `cache_ttl_secs`,
 * shortened by the upstream's own Cache-Control and Age (roles/freshness.ts). The time is stored
 * in the repository's tag map beside the mapping it confirms (`TagsDoc.confirmedUntil`), so every
 * worker and replica serves a confirmed tag without asking the upstream again.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ttlSecs } from '../../../roles/freshness.js';
import { header } from '../../../roles/upstream.js';

/** ms since the epoch until which an answer carrying `headers` at `now` holds; undefined when it holds not at all. */
export function confirmedUntil(cacheTtlSecs: number, headers: IncomingHttpHeaders, now: number): number | undefined {
  const secs = ttlSecs(cacheTtlSecs, {
    ...optional('cacheControl', header(headers, 'cache-control')),
    ...optional('age', header(headers, 'age')),
  });
  return secs === 0 ? undefined : now + secs * 1000;
}

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}
