/**
 * `GET /{route}/simple/` and `GET /{route}/simple/{project}/`. Project names are PEP 503
 * normalised; any other spelling, or a missing trailing slash, is redirected (301) to the
 * canonical URL, as PyPI does.
 */
import type { IndexRequest } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { assertProjectServable, policyPageVariant, servableFiles, visibleProjects } from '../../read/policy/apply.js';
import { normalizeName } from '../../model/records.js';
import { HTML_V1_TYPE, negotiate, type Negotiated } from './negotiate.js';
import type { RenderedPage } from '../page-cache.js';
import { renderDetailHtml, renderDetailJson, renderProjectListHtml, renderProjectListJson } from './render.js';
import { redirect, sendPage } from '../respond.js';
import type { ProjectSource } from '../project-source.js';

// `Vary: Accept` is set for every answer on these paths by the route table (handlers/routes.ts).

export async function serveProjectList(source: ProjectSource, req: IndexRequest): Promise<void> {
  if (!req.trailingSlash) return redirect(req, ['simple'], true);
  const chosen = negotiate(req.request.headers.accept);
  const render = chosen.format === 'json' ? renderProjectListJson : renderProjectListHtml;
  // Policy is fixed for the process, so the cached page may hold the filtered list.
  const page = await source.listPage(req.index.name, chosen.format, (names) => render(visibleProjects(req.index, names)));
  sendPage(req, forMediaType(page, chosen), chosen.contentType);
}

export async function serveProjectDetail(source: ProjectSource, req: IndexRequest, project: string): Promise<void> {
  const normalized = normalizeName(project);
  if (normalized !== project || !req.trailingSlash) {
    return redirect(req, ['simple', normalized], true);
  }
  assertProjectServable(req.index, normalized);
  const chosen = negotiate(req.request.headers.accept);
  const render = chosen.format === 'json' ? renderDetailJson : renderDetailHtml;
  const variant = chosen.format + policyPageVariant(req.index);
  const page = await source.projectPage(req.index.name, normalized, variant, (project) => render(servableFiles(req.index, project)));
  if (!page) throw new HttpError(404, `project "${normalized}" not found in index ${req.index.name}`);
  sendPage(req, forMediaType(page, chosen), chosen.contentType);
}

/** The two HTML media types share bytes but are different representations: distinct ETags. */
function forMediaType(page: RenderedPage, chosen: Negotiated): RenderedPage {
  return chosen.contentType === HTML_V1_TYPE ? { body: page.body, etag: `${page.etag.slice(0, -1)}-v1"` } : page;
}
