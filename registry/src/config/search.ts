/**
 * `[search]`: the derived search index (search/, docs/search.md): whether this process keeps one,
 * and how often it reads each index's summary document to pick up writes made through other
 * processes (`refresh_secs`: the freshness bound of a search across processes).
 */
import type { FileConfig } from './schema.js';

export interface SearchConfig {
  enabled: boolean;
  refreshSecs: number;
}

/** Two seconds: one small read per index and process each time, and a delay a person hardly notices. */
export const DEFAULT_SEARCH_REFRESH_SECS = 2;

export function resolveSearch(table: FileConfig['search']): SearchConfig {
  return { enabled: table?.enabled ?? true, refreshSecs: table?.refresh_secs ?? DEFAULT_SEARCH_REFRESH_SECS };
}
