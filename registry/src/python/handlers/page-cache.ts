/**
 * Rendered-bytes cache for pages derived from one project record. An entry is tagged with the
 * record's store version and used only while the store still reports that version, so a write
 * by another process over the same store is seen on the next request. Bounded by entry count and
 * total bytes; least recently used entries go first (a Map keeps insertion order).
 */
import { createHash } from 'node:crypto';

export interface RenderedPage {
  body: Buffer;
  /** Strong validator of `body` (quoted). */
  etag: string;
}

interface Entry extends RenderedPage {
  version: string;
}

export class PageCache {
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;

  constructor(
    readonly maxEntries = 4096,
    readonly maxBytes = 64 * 1024 * 1024,
  ) {}

  get size(): number {
    return this.#entries.size;
  }

  /** The cached page for `key` if it was rendered from `version`, without rendering. */
  peek(key: string, version: string): RenderedPage | null {
    const hit = this.#entries.get(key);
    if (!hit || hit.version !== version) return null;
    this.#entries.delete(key);
    this.#entries.set(key, hit);
    return hit;
  }

  /**
   * The cached page for `key` if it was rendered from `version`; otherwise renders and caches it.
   * A renderer's null (nothing to show) is passed through and not cached.
   */
  obtain(key: string, version: string, render: () => string | null): RenderedPage | null {
    const hit = this.#entries.get(key);
    if (hit && hit.version === version) {
      this.#entries.delete(key);
      this.#entries.set(key, hit);
      return hit;
    }
    const text = render();
    if (text === null) return null;
    const body = Buffer.from(text, 'utf8');
    const entry: Entry = { body, etag: etagOf(body), version };
    this.#remove(key);
    if (body.length <= this.maxBytes / 4) {
      this.#entries.set(key, entry);
      this.#bytes += body.length;
      this.#evict();
    }
    return entry;
  }

  #remove(key: string): void {
    const old = this.#entries.get(key);
    if (!old) return;
    this.#entries.delete(key);
    this.#bytes -= old.body.length;
  }

  #evict(): void {
    while (this.#entries.size > this.maxEntries || this.#bytes > this.maxBytes) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) return;
      this.#remove(oldest.value);
    }
  }
}

export function etagOf(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"`;
}
