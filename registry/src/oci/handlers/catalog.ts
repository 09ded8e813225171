/**
 * `GET /v2/_catalog`: the repositories of every OCI index, as the full names clients pull
 * (`<route>/<repo>`), sorted and paged like tag lists. A virtual index lists what its members hold
 * under its own route, since those names resolve through it too. A page holds at most
 * `MAX_CATALOG_PAGE` names whatever `n` asks (the distribution registry's default), and links to
 * the next one.
 */
import { byCodeUnit, nextLink, pageOf, parsePageQuery } from '../model/pages.js';
import type { OciDeps } from './deps.js';
import type { OciExchange } from './exchange.js';

export const MAX_CATALOG_PAGE = 1000;

async function repositoryNames({ ociIndexes, members }: Pick<OciDeps, 'ociIndexes' | 'members'>): Promise<string[]> {
  const names = new Set<string>();
  for (const index of ociIndexes) {
    for (const repo of await members.repositories(index)) names.add([...index.routeSegments, ...repo].join('/'));
  }
  return [...names].sort(byCodeUnit);
}

export async function listCatalog({ deps, query, reply }: OciExchange): Promise<void> {
  const wanted = parsePageQuery(query);
  const n = Math.min(wanted.n ?? MAX_CATALOG_PAGE, MAX_CATALOG_PAGE);
  const page = pageOf(await repositoryNames(deps), { ...wanted, n });
  if (page.next !== undefined) reply.header('Link', nextLink('/v2/_catalog', n, page.next));
  await reply.type('application/json').send(JSON.stringify({ repositories: page.entries }));
}
