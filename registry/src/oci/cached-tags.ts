/**
 * The tag list of a lone cached index: the upstream's answer, with `name` set to the name the
 * client asked for and a `Link` to the next page rewritten onto velodex's own path (the client's
 * `n` and `last` are forwarded, so paging is the upstream's). A repository the upstream does not
 * know is NAME_UNKNOWN; an upstream that fails is 502 UNKNOWN.
 */
import { buffer } from 'node:stream/consumers';
import type { CachedRepos } from './cached.js';
import type { OciCall } from './context.js';
import { OciError } from './errors.js';
import { isObject } from './manifest-check.js';
import { discard, header } from '../roles/upstream.js';
import { UpstreamFailure, upstreamFailureOf } from './upstream-failure.js';

/** A tag list is small; a larger answer is not one. */
const MAX_TAGS_BYTES = 16 * 1024 * 1024;

export async function listCachedTags(call: OciCall, cached: CachedRepos): Promise<void> {
  const { target, query, reply } = call;
  const upstream = cached.upstream;
  const forwarded = new URLSearchParams();
  for (const key of ['n', 'last']) {
    const v = query.get(key);
    if (v !== null) forwarded.set(key, v);
  }
  const qs = forwarded.toString();
  let tags: unknown;
  let link: string | undefined;
  try {
    const res = await upstream.fetch({ repository: upstream.upstreamName(target.repo), path: `tags/list${qs ? `?${qs}` : ''}` });
    if (res.status === 404) {
      discard(res);
      throw new OciError('NAME_UNKNOWN', `the upstream registry has no repository "${target.repo.join('/')}"`);
    }
    if (res.status !== 200) {
      discard(res);
      throw new UpstreamFailure(`answered ${res.status} to the tag list`);
    }
    if (Number(header(res.headers, 'content-length') ?? '0') > MAX_TAGS_BYTES) {
      res.body.destroy();
      throw new UpstreamFailure('sent a tag list over 16 MiB');
    }
    const doc: unknown = JSON.parse((await buffer(res.body)).toString('utf8'));
    if (!isObject(doc)) throw new UpstreamFailure('sent a tag list that is not a JSON object');
    tags = Array.isArray(doc.tags) ? doc.tags.filter((t) => typeof t === 'string') : [];
    link = header(res.headers, 'link');
    cached.health.up();
  } catch (err) {
    const failure = upstreamFailureOf(err instanceof SyntaxError ? new UpstreamFailure('sent a tag list that is not JSON') : err);
    if (!failure) throw err;
    throw cached.unavailable(failure, target.repo);
  }
  const next = link !== undefined ? rewriteLink(link, target.name) : undefined;
  if (next !== undefined) reply.header('Link', next);
  await reply.type('application/json').send(JSON.stringify({ name: target.name, tags }));
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
