/**
 * The upstream's tag list of a repository: one page as the upstream answers it (the client's `n`
 * and `last` forwarded, so paging is the upstream's), with its `Link` to the next page as the
 * upstream wrote it; the handler points that link at velodex's own path. A repository the
 * upstream does not know is NAME_UNKNOWN; an upstream that fails is an `UpstreamError`.
 */
import { discard, header, readBounded } from '../../../roles/upstream.js';
import { UpstreamError } from '../../../roles/upstream-error.js';
import { OciError } from '../../model/errors.js';
import { isObject } from '../../model/manifest-check.js';
import type { CachedUpstream } from './upstream.js';
import type { UpstreamRegistry } from './upstream-registry.js';

/** A tag list is small; a larger answer is not one. */
const MAX_TAGS_BYTES = 16 * 1024 * 1024;

export interface UpstreamTags {
  tags: string[];
  /** The upstream's `Link` header, when its list goes on. */
  link?: string;
}

/** One page of the upstream's tags of `repo`; `query` is forwarded as it is (`n`, `last`). */
export async function fetchUpstreamTags(upstream: CachedUpstream, repo: readonly string[], query: URLSearchParams): Promise<UpstreamTags> {
  const tags = await upstream.ask(repo, (registry) => tagsFrom(registry, repo, query), { absent: (t) => t === null });
  if (tags === null) throw new OciError('NAME_UNKNOWN', `the upstream registry has no repository "${repo.join('/')}"`);
  return tags;
}

/** One upstream's page of tags; null when it has no such repository. */
async function tagsFrom(registry: UpstreamRegistry, repo: readonly string[], query: URLSearchParams): Promise<UpstreamTags | null> {
  const qs = query.toString();
  const res = await registry.fetch({ repository: registry.upstreamName(repo), path: `tags/list${qs ? `?${qs}` : ''}` });
  if (res.status === 404) {
    discard(res);
    return null;
  }
  if (res.status !== 200) {
    discard(res);
    throw new UpstreamError('status', null, `answered ${res.status} to the tag list`, { status: res.status });
  }
  let doc: unknown;
  try {
    doc = JSON.parse((await readBounded(res, MAX_TAGS_BYTES)).toString('utf8'));
  } catch (err) {
    if (err instanceof UpstreamError && err.kind === 'too_large') throw new UpstreamError('too_large', null, 'sent a tag list over 16 MiB');
    throw err instanceof SyntaxError ? new UpstreamError('malformed', null, 'sent a tag list that is not JSON') : err;
  }
  if (!isObject(doc)) throw new UpstreamError('malformed', null, 'sent a tag list that is not a JSON object');
  const tags = Array.isArray(doc.tags) ? doc.tags.filter((t): t is string => typeof t === 'string') : [];
  const link = header(res.headers, 'link');
  return { tags, ...(link !== undefined ? { link } : {}) };
}
