/**
 * One entry of the derived search index: a project or repository of one index, with the fields
 * a search shows and matches. Ecosystems build entries from what they already store
 * (ecosystem.ts `SearchSource`); the core never reads an ecosystem's documents itself.
 */
export interface SearchEntry {
  /** The ecosystem id (`IndexConfig.ecosystem`). */
  ecosystem: string;
  /** The name of the index that holds it (a hosted or cached index). */
  index: string;
  /** The name as the index shows it (display form). */
  name: string;
  /** The ecosystem's normalised name: one entry per key and index. */
  key: string;
  /** The latest version (Python), when known. */
  version?: string;
  /** Every version is yanked: `version` is the latest yanked one. */
  yanked?: boolean;
  /** Tags, newest first (OCI), capped by the ecosystem. */
  tags?: string[];
  /** A one-line summary (Python `Summary`, OCI `org.opencontainers.image.description`). */
  summary?: string;
  /** OCI `org.opencontainers.image.title`. */
  title?: string;
  /** OCI `org.opencontainers.image.source`. */
  source?: string;
  keywords?: string[];
  classifiers?: string[];
  requiresPython?: string;
}

/** Caps on what one entry keeps, so that memory per entry is bounded whatever the metadata says. */
export const ENTRY_LIMITS = {
  text: 512,
  keywords: 32,
  classifiers: 48,
  tags: 16,
  field: 256,
} as const;

/** The entry with every field cut to `ENTRY_LIMITS` (ecosystems may hand in anything). */
export function boundedEntry(entry: SearchEntry): SearchEntry {
  const cut = (s: string | undefined, n: number = ENTRY_LIMITS.field): string | undefined => (s === undefined ? undefined : s.length > n ? s.slice(0, n) : s);
  const list = (xs: string[] | undefined, n: number): string[] | undefined => (xs === undefined ? undefined : xs.slice(0, n).map((x) => cut(x) ?? ''));
  const out: SearchEntry = { ecosystem: entry.ecosystem, index: entry.index, name: entry.name, key: entry.key };
  const optional: Partial<SearchEntry> = {
    version: cut(entry.version),
    yanked: entry.yanked || undefined,
    tags: list(entry.tags, ENTRY_LIMITS.tags),
    summary: cut(entry.summary, ENTRY_LIMITS.text),
    title: cut(entry.title),
    source: cut(entry.source),
    keywords: list(entry.keywords, ENTRY_LIMITS.keywords),
    classifiers: list(entry.classifiers, ENTRY_LIMITS.classifiers),
    requiresPython: cut(entry.requiresPython),
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) (out as unknown as Record<string, unknown>)[k] = v;
  return out;
}

/** Every field, by how it compares: a field added to `SearchEntry` must be named here (the type says so). */
const FIELDS: Record<keyof SearchEntry, 'value' | 'list'> = {
  ecosystem: 'value',
  index: 'value',
  name: 'value',
  key: 'value',
  version: 'value',
  yanked: 'value',
  tags: 'list',
  summary: 'value',
  title: 'value',
  source: 'value',
  keywords: 'list',
  classifiers: 'list',
  requiresPython: 'value',
};
const FIELD_NAMES = Object.keys(FIELDS) as Array<keyof SearchEntry>;

/** Whether two entries say the same (a rebuild that reads an unchanged entry leaves it as it is). */
export function sameEntry(a: SearchEntry, b: SearchEntry): boolean {
  return FIELD_NAMES.every((k) => {
    const x = a[k];
    const y = b[k];
    if (x === y) return true;
    if (FIELDS[k] === 'value' || !Array.isArray(x) || !Array.isArray(y)) return false;
    return x.length === y.length && x.every((v, i) => v === y[i]);
  });
}
