/**
 * What the OCI ecosystem gives the search index (search/source.ts): one entry per repository of a
 * hosted or cached index (a cached one holds what was pulled through it), from the documents the
 * index keeps and never from an upstream. Tags newest first; title, description and source from
 * the `org.opencontainers.image.*` annotations of the newest tag's manifest, else the labels of
 * its image config (what `docker build` writes them into).
 */
import { buffer } from 'node:stream/consumers';
import type { IndexConfig } from '../config/types.js';
import { Policy } from '../policy/rules.js';
import type { SearchEntry } from '../search/entry.js';
import type { SearchSource } from '../search/source.js';
import type { BlobStore } from '../storage/types.js';
import type { TagsDoc } from './model/meta.js';
import type { BlobBytes } from './read/blob-bytes.js';
import type { HostedRepos } from './read/hosted/repos.js';

/** Manifests and configs past this are not read for search (annotations sit in small documents). */
const MAX_SEARCH_DOC = 1024 * 1024;
const TAGS_SHOWN = 16;
const ANNOTATION = { title: 'org.opencontainers.image.title', description: 'org.opencontainers.image.description', source: 'org.opencontainers.image.source' } as const;

type Strings = Record<string, string>;

/**
 * `manifests`: the manifests' bytes by digest, kept in memory (read/blob-bytes.ts): an entry is read
 * right after a pull or push, which reads the same manifest. Configs are read from `blobs`.
 */
export function ociSearch(reposOf: (index: IndexConfig) => HostedRepos, manifests: BlobBytes, blobs: BlobStore): SearchSource {
  const policies = new WeakMap<IndexConfig, Policy>();
  const policyOf = (index: IndexConfig): Policy => {
    let p = policies.get(index);
    if (!p) policies.set(index, (p = new Policy([index.policy])));
    return p;
  };

  /** A config: its size first, so a large one is never read. */
  async function configBytes(hex: string): Promise<Buffer | null> {
    const info = await blobs.stat(hex);
    if (!info || info.size > MAX_SEARCH_DOC) return null;
    const stream = await blobs.get(hex);
    return stream && buffer(stream);
  }

  async function json(bytes: Buffer | null): Promise<Record<string, unknown> | null> {
    if (!bytes || bytes.length > MAX_SEARCH_DOC) return null;
    try {
      const doc: unknown = JSON.parse(bytes.toString('utf8'));
      return doc !== null && typeof doc === 'object' ? (doc as Record<string, unknown>) : null;
    } catch {
      return null;
    }
  }

  /** The annotations of the manifest, else the labels of its config. */
  async function annotationsOf(hex: string): Promise<Strings> {
    // A manifest is at most 4 MiB (model/manifest-check.ts).
    const manifest = await json(await manifests.get(hex));
    if (!manifest) return {};
    const own = strings(manifest.annotations);
    if (Object.values(ANNOTATION).some((k) => own[k] !== undefined)) return own;
    const config = manifest.config as { digest?: unknown } | undefined;
    const digest = typeof config?.digest === 'string' && config.digest.startsWith('sha256:') ? config.digest.slice(7) : null;
    const image = digest ? await json(await configBytes(digest)) : null;
    const labels = strings((image?.config as { Labels?: unknown } | undefined)?.Labels);
    return { ...labels, ...own };
  }

  return {
    async keys(index) {
      return (await reposOf(index).repositories()).map((r) => r.join('/'));
    },

    async entry(index, key) {
      const repos = reposOf(index);
      const repo = key.split('/');
      const [doc, digests] = await Promise.all([repos.tagsDoc(repo), repos.manifestDigests(repo)]);
      if (digests.length === 0) return null;
      const tags = newestTags(doc);
      const newest = tags[0] !== undefined ? doc.tags[tags[0]] : digests[0];
      const annotations = newest ? await annotationsOf(newest) : {};
      const entry: SearchEntry = { ecosystem: 'oci', index: index.name, name: key, key };
      if (tags.length) entry.tags = tags.slice(0, TAGS_SHOWN);
      const title = annotations[ANNOTATION.title];
      const description = annotations[ANNOTATION.description];
      const source = annotations[ANNOTATION.source];
      if (title) entry.title = title;
      if (description) entry.summary = description;
      if (source) entry.source = source;
      return entry;
    },

    // OCI indexes take `deny-projects`/`allow-projects` for search as Python does: never shown.
    serves: (index, key) => policyOf(index).allowsProject(key),
    browse: (index, entry) => ({ index: index.name, repo: `${index.route}/${entry.name}` }),
  };
}

function strings(value: unknown): Strings {
  if (value === null || typeof value !== 'object') return {};
  return Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** Tags by when they were last pointed (newest first; those without a time last, by name). */
function newestTags(doc: TagsDoc): string[] {
  const at = doc.taggedAt ?? {};
  return Object.keys(doc.tags).sort((a, b) => (at[b] ?? '').localeCompare(at[a] ?? '') || a.localeCompare(b));
}
