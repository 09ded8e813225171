/**
 * `GET /v2/<name>/tags/list`: the members' tags under the name, sorted, paged with `n` and `last`
 * and a `Link` header to the next page. A repository without tags answers an empty list. A lone
 * cached index answers with its upstream's list (cached-tags.ts).
 */
import { listCachedTags } from '../read/cached/upstream-tags.js';
import type { OciCall } from './exchange.js';
import { byCodeUnit, nextLink, pageOf, parsePageQuery } from '../model/pages.js';

export async function listTags(call: OciCall): Promise<void> {
  const { deps, target, query, reply } = call;
  if (target.index.role === 'cached') return listCachedTags(call, deps.members.cached(target.index));
  const all = (await deps.members.tags(target.index, target.repo)).sort(byCodeUnit);
  const wanted = parsePageQuery(query);
  const page = pageOf(all, wanted);
  if (page.next !== undefined && wanted.n !== undefined) reply.header('Link', nextLink(`/v2/${target.name}/tags/list`, wanted.n, page.next));
  await reply.type('application/json').send(JSON.stringify({ name: target.name, tags: page.entries }));
}
