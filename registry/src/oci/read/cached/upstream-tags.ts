/**
 * The upstream's tag list of a repository: one page as the upstream answers it (the client's `n`
 * and `last` forwarded, so paging is the upstream's), with its `Link` to the next page as the
 * upstream wrote it; the handler points that link at velodex's own path. A repository the
 * upstream does not know is NAME_UNKNOWN; an upstream that fails is an `UpstreamFailure`.
 */
import { discard, DocumentTooLargeError, header, readBounded } from '../../../roles/upstream.js';
import { OciError } from '../../model/errors.js';
import { isObject } from '../../model/manifest-check.js';
import { UpstreamFailure } from './upstream-failure.js';
import type { CachedUpstream } from './upstream.js';

/** A tag list is small; a larger answer is not one. */
const MAX_TAGS_BYTES = 16 * 1024 * 1024;

export interface UpstreamTags {
  tags: string[];
  /** The upstream's `Link` header, when its list goes on. */
  link?: string;
}

/** One page of the upstream's tags of `repo`; `query` is forwarded as it is (`n`, `last`). */
export async function fetchUpstreamTags(upstream: CachedUpstream, repo: readonly string[], query: URLSearchParams): Promise<UpstreamTags> {
  const registry = upstream.registry;
  const qs = query.toString();
  const res = await registry.fetch({ repository: registry.upstreamName(repo), path: `tags/list${qs ? `?${qs}` : ''}` });
  if (res.status === 404) {
    discard(res);
    throw new OciError('NAME_UNKNOWN', `the upstream registry has no repository "${repo.join('/')}"`);
  }
  if (res.status !== 200) {
    discard(res);
    throw new UpstreamFailure(`answered ${res.status} to the tag list`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse((await readBounded(res, MAX_TAGS_BYTES)).toString('utf8'));
  } catch (err) {
    if (err instanceof DocumentTooLargeError) throw new UpstreamFailure('sent a tag list over 16 MiB');
    throw err instanceof SyntaxError ? new UpstreamFailure('sent a tag list that is not JSON') : err;
  }
  if (!isObject(doc)) throw new UpstreamFailure('sent a tag list that is not a JSON object');
  upstream.health.up();
  const tags = Array.isArray(doc.tags) ? doc.tags.filter((t): t is string => typeof t === 'string') : [];
  const link = header(res.headers, 'link');
  return { tags, ...(link !== undefined ? { link } : {}) };
}
