/**
 * What an ecosystem gives the search index about one of its indexes (the `search` hook of
 * `Ecosystem`, ecosystem/ecosystem.ts). The core asks; it never reads an ecosystem's documents.
 */
import type { IndexConfig } from '../config/types.js';
import type { SearchEntry } from './entry.js';

export interface SearchSource {
  /** The keys (normalised names) of every project or repository the index holds: the first build of a process. */
  keys(index: IndexConfig): Promise<string[]>;
  /** The entry of `key` as stored now; null when the index no longer has it. */
  entry(index: IndexConfig, key: string): Promise<SearchEntry | null>;
  /**
   * Whether the index serves `key` to anyone (its effective policy, as its listing pages apply
   * it), evaluated at query time, so a policy change applies at once and nothing denied is shown.
   */
  serves(index: IndexConfig, key: string): boolean;
  /** The query of the web UI's browse page of `key` (`/browse?index=...&<these>`). */
  browse(index: IndexConfig, entry: SearchEntry): Record<string, string>;
}
