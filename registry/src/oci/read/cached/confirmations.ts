/**
 * When the upstream last confirmed each tag of a cached index, in process memory: a tag is
 * served without asking until its confirmation runs out (`cache_ttl_secs`, shortened by the
 * upstream's own Cache-Control and Age, roles/freshness.ts). Another replica, or this process
 * after a restart, revalidates a tag once on its first read.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ttlSecs } from '../../../roles/freshness.js';
import { header } from '../../../roles/upstream.js';

/** Confirmations kept before the expired ones are swept. */
const MAX_CONFIRMATIONS = 10_000;

export class TagConfirmations {
  /** `repo:tag` -> until when the upstream's confirmation holds (ms since the epoch). */
  readonly #until = new Map<string, number>();

  constructor(private readonly cacheTtlSecs: number) {}

  holds(key: string, now: number): boolean {
    return now < (this.#until.get(key) ?? 0);
  }

  /** The upstream just confirmed `key` with an answer carrying `headers`. */
  confirm(key: string, headers: IncomingHttpHeaders, now: number): void {
    const secs = ttlSecs(this.cacheTtlSecs, {
      ...optional('cacheControl', header(headers, 'cache-control')),
      ...optional('age', header(headers, 'age')),
    });
    if (secs === 0) {
      this.#until.delete(key);
      return;
    }
    this.#until.set(key, now + secs * 1000);
    // Expired confirmations are worth nothing: dropped once there are many.
    if (this.#until.size > MAX_CONFIRMATIONS) for (const [k, until] of this.#until) if (until <= now) this.#until.delete(k);
  }

  forget(key: string): void {
    this.#until.delete(key);
  }
}

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}
