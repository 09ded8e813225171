/**
 * The Python route table: requests under `/{route}/` to the Simple API, file downloads, legacy
 * JSON, inspection, uploads and the mutations. Routes are (path shape, methods); the neutral
 * mechanism (method lookup, HEAD as GET, 405 with `Allow`) is `http/route-table.ts`, and the
 * Python answers (404 bodies, `Vary` on Simple paths) are here; failures are answered by
 * Python's table (answers.ts).
 */
import type { IndexRequest, ServerContext } from '../../ecosystem/ecosystem.js';
import { HttpError } from '../../http/errors.js';
import { allowOf, selectRoute, type Methods } from '../../http/route-table.js';
import { isSha256Hex } from '../../storage/types.js';
import { isValidProjectName, pythonHolder } from '../model/records.js';
import { storeListedFile } from '../read/store-listed.js';
import { findServableFile, serveFile } from './files/handler.js';
import { handleInspect, type InspectServices } from './inspect/handler.js';
import { serveLegacyJson } from './legacy-json/handler.js';
import type { MutationDeps } from './mutations/handler.js';
import { mutationRoutes } from './mutations/routes.js';
import type { ProjectSource } from './project-source.js';
import { serveProjectDetail, serveProjectList } from './simple/handler.js';
import { handleUpload, type UploadServices } from './upload/handler.js';

type Handler = (req: IndexRequest, params: string[]) => Promise<void>;

export interface Route {
  /** The path parameters when `rest` has this route's shape, else null. */
  match(rest: readonly string[], trailingSlash: boolean): string[] | null;
  /** GET also answers HEAD. */
  methods: Methods<Handler>;
  /** The first parameter is a project name: one PEP 508 forbids names no project, so 404. */
  project?: boolean;
  /** Headers every answer on this path shape carries, errors included (Simple pages: `Vary`). */
  headers?: Record<string, string>;
}

/** What the write routes need beyond the project source. */
export type RouteLayers = Pick<MutationDeps, 'overrides' | 'cachedLayer' | 'checkStatus'>;

/** PEP 691: a Simple URL's answer depends on `Accept`, whatever its status. */
const SIMPLE_HEADERS = { vary: 'Accept' };

function withAllow(err: HttpError, allow: string): HttpError {
  return new HttpError(err.status, err.message, { ...err.headers, allow }, err.body);
}

/** Answers one request under an index route from `routes` (the first route with the method wins). */
export async function dispatch(routes: readonly Route[], req: IndexRequest): Promise<void> {
  // Several shapes may match one path (`simple/yank` is a detail page to GET and a yank to
  // PUT): the first route with the method wins; 405 when none has it, allowing what they all take.
  const selected = selectRoute(routes, (route) => route.match(req.rest, req.trailingSlash), req.request.method);
  if (selected.kind === 'not-found') {
    throw new HttpError(404, `not found: /${[req.index.route, ...req.rest].join('/')}${req.trailingSlash ? '/' : ''}`);
  }
  if (selected.kind === 'not-allowed') {
    for (const route of selected.matched) if (route.headers) req.reply.headers(route.headers);
    throw new HttpError(405, `${req.request.method} is not allowed here`, { allow: selected.allow });
  }
  const { route, params, handler } = selected;
  if (route.headers) req.reply.headers(route.headers);
  if (route.project && !isValidProjectName(params[0]!)) {
    throw new HttpError(404, `no project "${params[0]}" here: not a valid project name`);
  }
  return await handler(req, params).catch((err: unknown) => {
    // A write refused because the index takes none: only the path's reads are allowed,
    // maybe none (an empty Allow: "disabled by configuration", RFC 9110 §10.2.1).
    if (err instanceof HttpError && err.status === 405) {
      const pathRoutes = routes.filter((r) => r.match(req.rest, req.trailingSlash) !== null);
      throw withAllow(err, allowOf(pathRoutes.map((r) => r.methods), ['GET']));
    }
    throw err;
  });
}

/** What the Python endpoints use of the server's services, together. */
export type PythonServices = UploadServices & InspectServices & Pick<ServerContext, 'originOf' | 'recentUse'>;

export function pythonRoutes(ctx: PythonServices, source: ProjectSource, layers: RouteLayers): Route[] {
  return [
    // Checked in order. Legacy JSON comes before the Simple detail page so that
    // `/simple/json` is the JSON of a project named "simple"; pip and uv always ask for
    // `/simple/{project}/` with the slash.
    {
      match: (rest) => (rest.length === 0 ? [] : null),
      methods: {
        POST: (req) => handleUpload(ctx, req, layers.checkStatus),
      },
    },
    {
      match: (rest) => (rest.length === 3 && rest[0] === 'files' && isSha256Hex(rest[1] ?? '') ? [rest[1]!, rest[2]!] : null),
      methods: { GET: (req, params) => serveFile(source, ctx.stores, req, params[0]!, params[1]!, ctx.recentUse) },
    },
    {
      // inspect/{sha256}/{filename}[/{member...}]: members of an archive this index serves.
      match: (rest) => (rest.length >= 3 && rest[0] === 'inspect' ? rest.slice(1) : null),
      methods: {
        GET: (req, params) =>
          handleInspect(ctx, req, params[0]!, params[1]!, params.length > 2 ? params.slice(2).join('/') : null, {
            owns: async (sha256, filename) => (await findServableFile(source, req.index, sha256, filename)) !== null,
            fetch: async (sha256, filename) => {
              const listed = await findServableFile(source, req.index, sha256, filename);
              if (listed) await storeListedFile(listed);
            },
          }),
      },
    },
    {
      match: (rest, slash) => (rest.length === 2 && rest[1] === 'json' && !slash ? [rest[0]!] : null),
      project: true,
      methods: { GET: (req, params) => serveLegacyJson(source, ctx.originOf, req, params[0]!) },
    },
    {
      match: (rest, slash) => (rest.length === 3 && rest[2] === 'json' && !slash ? [rest[0]!, rest[1]!] : null),
      project: true,
      methods: { GET: (req, params) => serveLegacyJson(source, ctx.originOf, req, params[0]!, params[1]!) },
    },
    {
      match: (rest) => (rest.length === 1 && rest[0] === 'simple' ? [] : null),
      headers: SIMPLE_HEADERS,
      methods: { GET: (req) => serveProjectList(source, req) },
    },
    {
      match: (rest) => (rest.length === 2 && rest[0] === 'simple' ? [rest[1]!] : null),
      project: true,
      headers: SIMPLE_HEADERS,
      methods: { GET: (req, params) => serveProjectDetail(source, req, params[0]!) },
    },
    // yank, un-yank, delete, restore, promote (PUT/DELETE only).
    ...mutationRoutes({
      indexByName: ctx.indexByName,
      clientAddress: ctx.clientAddress,
      summaries: ctx.summaries,
      events: ctx.events,
      records: source.records,
      holderOf: (indexName) => ctx.stores.holds.as(pythonHolder(indexName)),
      ...layers,
    }),
  ];
}
