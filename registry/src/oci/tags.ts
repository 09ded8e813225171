/**
 * `GET /v2/<name>/tags/list`: the members' tags under the name, sorted, paged with `n` and `last`
 * and a `Link` header to the next page. A repository without tags answers an empty list.
 */
import type { OciCall } from './context.js';

function pageSize(value: string | null): number | undefined {
  if (value === null || !/^\d+$/.test(value)) return undefined;
  return Number(value);
}

export async function listTags(call: OciCall): Promise<void> {
  const { deps, target, query, reply } = call;
  const all = (await deps.members.tags(target.index, target.repo)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const last = query.get('last');
  const after = last === null ? all : all.filter((t) => t > last);
  const n = pageSize(query.get('n'));
  const page = n === undefined ? after : after.slice(0, n);
  if (n !== undefined && page.length < after.length && page.length > 0) {
    const marker = encodeURIComponent(page[page.length - 1] as string);
    reply.header('Link', `</v2/${target.name}/tags/list?n=${n}&last=${marker}>; rel="next"`);
  }
  await reply.type('application/json').send(JSON.stringify({ name: target.name, tags: page }));
}
