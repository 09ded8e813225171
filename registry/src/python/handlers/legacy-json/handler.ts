/** `GET /{route}/{project}/json` and `GET /{route}/{project}/{version}/json`. */
import type { IndexRequest } from '../../../http/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { assertProjectServable, policyPageVariant, servableFiles } from '../../read/policy/apply.js';
import { normalizeName } from '../../model/records.js';
import { redirect, sendPage } from '../respond.js';
import type { ProjectSource } from '../project-source.js';
import { renderProjectJson, renderReleaseJson, type UrlBase } from './render.js';

export async function serveLegacyJson(source: ProjectSource, req: IndexRequest, project: string, version?: string): Promise<void> {
  const normalized = normalizeName(project);
  if (normalized !== project) return redirect(req, [normalized, ...(version === undefined ? [] : [version]), 'json'], false);
  assertProjectServable(req.index, normalized);
  const base = urlBase(req);
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

/** The origin the client addressed, honouring a proxy's `X-Forwarded-Proto`/`-Host`. */
function urlBase(req: IndexRequest): UrlBase {
  const h = req.request.headers;
  const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v)?.split(',')[0]?.trim();
  const fwdHost = first(h['x-forwarded-host']);
  const fwdProto = first(h['x-forwarded-proto']);
  const host = fwdHost ?? first(h.host) ?? `${req.request.hostname}`;
  const proto = fwdHost && (fwdProto === 'https' || fwdProto === 'http') ? fwdProto : req.request.protocol;
  // Never echo a header that could break out of a URL.
  const safeHost = /^[A-Za-z0-9.:[\]-]+$/.test(host) ? host : '127.0.0.1';
  return { origin: `${proto}://${safeHost}`, route: req.index.route };
}
