/**
 * The tag list of a lone cached index: the upstream's answer, with `name` set to the name the
 * client asked for and a `Link` to the next page rewritten onto velodex's own path (the client's
 * `n` and `last` are forwarded, so paging is the upstream's). A repository the upstream does not
 * know is NAME_UNKNOWN; an upstream that fails is 502 UNKNOWN.
 */
import type { CachedRepos } from './repos.js';
import type { OciCall } from '../../handlers/exchange.js';
import { OciError } from '../../model/errors.js';
import { isObject } from '../../model/manifest-check.js';
import { discard, DocumentTooLargeError, header, readBounded } from '../../../roles/upstream.js';
import { UpstreamFailure, upstreamFailureOf } from './upstream-failure.js';

/** A tag list is small; a larger answer is not one. */
const MAX_TAGS_BYTES = 16 * 1024 * 1024;

export async function listCachedTags(call: OciCall, cached: CachedRepos): Promise<void> {
  const { target, query, reply } = call;
  const forwarded = new URLSearchParams();
  for (const key of ['n', 'last']) {
    const v = query.get(key);
    if (v !== null) forwarded.set(key, v);
  }
  let page: UpstreamTags;
  try {
    page = await fetchTags(cached, target.repo, forwarded.toString());
  } catch (err) {
    const failure = upstreamFailureOf(err);
    if (!failure) throw err;
    throw cached.unavailable(failure, target.repo);
  }
  const next = page.link !== undefined ? rewriteLink(page.link, target.name) : undefined;
  if (next !== undefined) reply.header('Link', next);
  await reply.type('application/json').send(JSON.stringify({ name: target.name, tags: page.tags }));
}

/** The tag names of the upstream's first page (for a virtual index's union). */
export async function upstreamTagNames(cached: CachedRepos, repo: readonly string[]): Promise<string[]> {
  return (await fetchTags(cached, repo, '')).tags;
}

interface UpstreamTags {
  tags: string[];
  link?: string;
}

async function fetchTags(cached: CachedRepos, repo: readonly string[], qs: string): Promise<UpstreamTags> {
  const upstream = cached.upstream;
  const res = await upstream.fetch({ repository: upstream.upstreamName(repo), path: `tags/list${qs ? `?${qs}` : ''}` });
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
  cached.health.up();
  const tags = Array.isArray(doc.tags) ? doc.tags.filter((t): t is string => typeof t === 'string') : [];
  const link = header(res.headers, 'link');
  return { tags, ...(link !== undefined ? { link } : {}) };
}

/** `<.../v2/<upstream name>/tags/list?n=..&last=..>; rel="next"` onto `/v2/<name>/tags/list`, its query kept. */
export function rewriteLink(link: string, name: string): string | undefined {
  const m = /<([^>]*)>(.*)$/s.exec(link);
  if (!m) return undefined;
  let query: string;
  try {
    query = new URL(m[1]!, 'http://upstream.invalid/').search;
  } catch {
    return undefined;
  }
  return `</v2/${name}/tags/list${query}>${m[2]}`;
}
