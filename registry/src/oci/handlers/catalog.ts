/**
 * `GET /v2/_catalog`: the repositories of every OCI index, as the full names clients pull
 * (`<route>/<repo>`), sorted and paged like tag lists. A virtual index lists what its members hold
 * under its own route, since those names resolve through it too. A page holds at most
 * `MAX_CATALOG_PAGE` names whatever `n` asks (the distribution registry's default), and links to
 * the next one. A private index's repositories are listed only to a caller who reads it
 * (read-access.ts); the others see the catalog as if it had none.
 */
import { byCodeUnit, nextLink, pageOf, parsePageQuery } from '../model/pages.js';
import type { OciDeps } from './deps.js';
import type { OciExchange } from './exchange.js';
import { readVerdictOf } from './read-access.js';
import type { Credentials } from './token/credentials.js';

export const MAX_CATALOG_PAGE = 1000;

/** Every repository of the indexes the caller reads: a private index's only with credentials that read it. */
async function repositoryNames(deps: Pick<OciDeps, 'ociIndexes' | 'members' | 'indexByName' | 'tokens'>, credentials: Credentials): Promise<string[]> {
  const { ociIndexes, members } = deps;
  const names = new Set<string>();
  for (const index of ociIndexes) {
    if (readVerdictOf(deps, credentials, index).kind !== 'reads') continue;
    for (const repo of await members.repositories(index)) names.add([...index.routeSegments, ...repo].join('/'));
  }
  return [...names].sort(byCodeUnit);
}

export async function listCatalog({ deps, query, reply, credentials }: OciExchange): Promise<void> {
  const wanted = parsePageQuery(query);
  const n = Math.min(wanted.n ?? MAX_CATALOG_PAGE, MAX_CATALOG_PAGE);
  const page = pageOf(await repositoryNames(deps, credentials), { ...wanted, n });
  if (page.next !== undefined) reply.header('Link', nextLink('/v2/_catalog', n, page.next));
  await reply.type('application/json').send(JSON.stringify({ repositories: page.entries }));
}
