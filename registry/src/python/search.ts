/**
 * What the Python ecosystem gives the search index (search/source.ts): one entry per project of a
 * hosted or cached index, from what velodex already stores and never from an upstream. The
 * version is the release installers would pick (`latestRelease`); summary, keywords and
 * classifiers come from the core metadata of that release's files (a wheel's first), which a
 * hosted index stores with every upload and a cached index once it fetched the file or its
 * `.metadata` sibling. A cached project whose metadata velodex has not fetched is found by name.
 */
import { buffer } from 'node:stream/consumers';
import type { IndexConfig } from '../config/types.js';
import type { SearchEntry } from '../search/entry.js';
import type { SearchSource } from '../search/source.js';
import type { BlobStore } from '../storage/types.js';
import { first, parseHeaders, type Headers } from './model/core-metadata.js';
import type { ProjectRecords } from './model/records.js';
import { latestRelease, resolveProject, type ResolvedFile, type ResolvedProject } from './model/resolved.js';
import { CachedSource } from './read/cached/source.js';
import { readPolicy } from './read/policy/effective.js';
import type { SourceLookup } from './read/source/types.js';

/** Core metadata past this is not read for search (the header block comes first and is small). */
const MAX_SEARCH_METADATA = 1024 * 1024;

export function pythonSearch(lookup: SourceLookup, records: ProjectRecords, blobs: BlobStore): SearchSource {
  const cachedOf = (index: IndexConfig): CachedSource | null => {
    const source = lookup(index.name);
    return source instanceof CachedSource ? source : null;
  };

  async function project(index: IndexConfig, key: string): Promise<{ project: ResolvedProject; metadata: (f: ResolvedFile) => Promise<Buffer | null> } | null> {
    const cached = cachedOf(index);
    if (cached) {
      const found = await cached.storedProject(key);
      return found && { project: found, metadata: (f) => cached.files.storedMetadata(f) };
    }
    const found = await records.get(index.name, key);
    if (!found) return null;
    return {
      project: resolveProject(key, found.record),
      metadata: async (f) => {
        if (!f.metadataSha256) return null;
        const stream = await blobs.get(f.metadataSha256);
        return stream && buffer(stream);
      },
    };
  }

  return {
    async keys(index) {
      const cached = cachedOf(index);
      if (!cached) return (await records.names(index.name)).names;
      const keys: string[] = [];
      for await (const key of cached.storedNames()) keys.push(key);
      return keys;
    },

    async entry(index, key) {
      const found = await project(index, key);
      const release = found && latestRelease(found.project);
      if (!found || !release) return null;
      const entry: SearchEntry = { ecosystem: 'python', index: index.name, name: found.project.name, key, version: release.version };
      if (release.yanked) entry.yanked = true;
      const requiresPython = release.files.find((f) => f.requiresPython)?.requiresPython;
      if (requiresPython) entry.requiresPython = requiresPython;
      const headers = await metadataOf(release.files, found.metadata);
      if (headers) Object.assign(entry, fieldsOf(headers));
      return entry;
    },

    serves: (index, key) => readPolicy(index).allowsProject(key),
    browse: (index, entry) => ({ index: index.name, project: entry.name }),
  };
}

/** The headers of the first file of the release whose metadata is stored (wheels first: sdists' PKG-INFO may be older metadata). */
async function metadataOf(files: readonly ResolvedFile[], read: (f: ResolvedFile) => Promise<Buffer | null>): Promise<Headers | null> {
  const ordered = [...files.filter((f) => f.kind === 'wheel'), ...files.filter((f) => f.kind !== 'wheel')];
  for (const file of ordered) {
    let bytes: Buffer | null;
    try {
      bytes = await read(file);
    } catch {
      // Unreadable (a broken archive, bytes gone): try the next file.
      continue;
    }
    if (!bytes) continue;
    try {
      return parseHeaders(bytes.subarray(0, MAX_SEARCH_METADATA), `${file.filename} metadata`);
    } catch {
      continue;
    }
  }
  return null;
}

function fieldsOf(headers: Headers): Partial<SearchEntry> {
  const out: Partial<SearchEntry> = {};
  const summary = first(headers, 'Summary');
  if (summary) out.summary = summary.replace(/\s+/g, ' ');
  const keywords = (headers.get('keywords') ?? []).flatMap((k) => k.split(/[,\s]+/)).filter((k) => k !== '');
  if (keywords.length) out.keywords = keywords;
  const classifiers = headers.get('classifier');
  if (classifiers?.length) out.classifiers = classifiers;
  const requiresPython = first(headers, 'Requires-Python');
  if (requiresPython) out.requiresPython = requiresPython;
  return out;
}
