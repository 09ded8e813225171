/**
 * `GET /v2/<name>/tags/list`: the members' tags under the name, sorted, paged with `n` and `last`
 * and a `Link` header to the next page. A repository without tags answers an empty list. A lone
 * cached index answers with its upstream's list: `name` set to the name the client asked for, the
 * client's `n` and `last` forwarded (paging is the upstream's), and the upstream's `Link` to the
 * next page pointed at velodex's own path. A repository the upstream does not know is
 * NAME_UNKNOWN; an upstream that fails is 502 UNKNOWN (read/cached/repos.ts `upstreamTags`).
 */
import type { CachedIndex } from '../../config/types.js';
import { byCodeUnit, nextLink, pageOf, parsePageQuery } from '../model/pages.js';
import type { OciCall } from './exchange.js';

export async function listTags(call: OciCall): Promise<void> {
  const { deps, target, query, reply } = call;
  if (target.index.role === 'cached') return listUpstreamTags(call, target.index);
  const all = (await deps.members.tags(target.index, target.repo)).sort(byCodeUnit);
  const wanted = parsePageQuery(query);
  const page = pageOf(all, wanted);
  if (page.next !== undefined && wanted.n !== undefined) reply.header('Link', nextLink(`/v2/${target.name}/tags/list`, wanted.n, page.next));
  await reply.type('application/json').send(JSON.stringify({ name: target.name, tags: page.entries }));
}

async function listUpstreamTags(call: OciCall, index: CachedIndex): Promise<void> {
  const { deps, target, query, reply } = call;
  const forwarded = new URLSearchParams();
  for (const key of ['n', 'last']) {
    const v = query.get(key);
    if (v !== null) forwarded.set(key, v);
  }
  const page = await deps.members.cached(index).upstreamTags(target.repo, forwarded);
  const next = page.link !== undefined ? rewriteLink(page.link, target.name) : undefined;
  if (next !== undefined) reply.header('Link', next);
  await reply.type('application/json').send(JSON.stringify({ name: target.name, tags: page.tags }));
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
