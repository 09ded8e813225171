/** `GET /{route}/{project}/json` and `GET /{route}/{project}/{version}/json`. */
import { localOrigin } from '../../../discovery/origin.js';
import type { IndexRequest, OriginOf } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { assertProjectServable, policyPageVariant, servableFiles } from '../../read/policy/apply.js';
import { normalizeName } from '../../model/records.js';
import { redirect, sendPage } from '../respond.js';
import type { ProjectSource } from '../project-source.js';
import { renderProjectJson, renderReleaseJson, type UrlBase } from './render.js';

/** `originOf`: the origin the documents' absolute URLs start with (`ServerContext.originOf`). */
export async function serveLegacyJson(source: ProjectSource, originOf: OriginOf, req: IndexRequest, project: string, version?: string): Promise<void> {
  const normalized = normalizeName(project);
  if (normalized !== project) return redirect(req, [normalized, ...(version === undefined ? [] : [version]), 'json'], false);
  assertProjectServable(req.index, normalized);
  const base = urlBase(originOf, req);
  // The documents hold absolute URLs, so the origin is part of what the bytes depend on.
  const variant = `legacy\n${base.origin}\n${version ?? ''}${policyPageVariant(req.index)}`;
  const page = await source.projectPage(req.index.name, normalized, variant, (resolved) => {
    const servable = servableFiles(req.index, resolved);
    return version === undefined ? renderProjectJson(base, servable) : renderReleaseJson(base, servable, version);
  });
  if (!page) {
    throw new HttpError(404, version === undefined ? `project "${normalized}" not found` : `project "${normalized}" has no version "${version}"`);
  }
  sendPage(req, page, 'application/json; charset=utf-8');
}

/** The origin the client addressed (a trusted proxy's forwarded headers weighed), or the connection's own address. */
function urlBase(originOf: OriginOf, req: IndexRequest): UrlBase {
  const origin = originOf(req.request) ?? localOrigin(req.request.raw.socket);
  return { origin: origin.href, route: req.index.route };
}
