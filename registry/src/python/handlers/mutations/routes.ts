/**
 * The dispatch entries of the Python write endpoints other than upload, in the shape of the
 * route table in `handlers/routes.ts`. Trailing slashes are optional on all of them.
 */
import type { IndexRequest } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { handleMutation, type MutationDeps } from './handler.js';
import { handlePromote } from './promote.js';

type Handler = (req: IndexRequest, params: string[]) => Promise<void>;

export interface MutationRoute {
  match(rest: readonly string[], trailingSlash: boolean): string[] | null;
  methods: Partial<Record<'GET' | 'PUT' | 'DELETE', Handler>>;
  /** The first parameter is a project name (checked by the dispatcher). */
  project: true;
}

/** `{project}/[{version}/]{verb}` → [project] or [project, version]. */
function scoped(verb: string) {
  return (rest: readonly string[]): string[] | null =>
    (rest.length === 2 || rest.length === 3) && rest.at(-1) === verb ? rest.slice(0, -1) : null;
}

export function mutationRoutes(deps: MutationDeps): MutationRoute[] {
  return [
    {
      match: scoped('yank'),
      project: true,
      methods: {
        PUT: (req, [project, version]) => handleMutation(deps, req, 'yank', project!, version),
        DELETE: (req, [project, version]) => handleMutation(deps, req, 'unyank', project!, version),
      },
    },
    {
      match: scoped('restore'),
      project: true,
      methods: { PUT: (req, [project, version]) => handleMutation(deps, req, 'restore', project!, version) },
    },
    {
      match: (rest) => (rest.length === 3 && rest[2] === 'promote' ? [rest[0]!, rest[1]!] : null),
      project: true,
      methods: { PUT: (req, [project, version]) => handlePromote(deps, req, project!, version!) },
    },
    {
      match: (rest) => (rest.length === 1 || rest.length === 2 ? [...rest] : null),
      project: true,
      methods: {
        DELETE: (req, [project, version]) => handleMutation(deps, req, 'delete', project!, version),
        // Any one- or two-segment path has this shape: reading one is "not found", not 405.
        GET: (req) => Promise.reject(new HttpError(404, `not found: /${[req.index.route, ...req.rest].join('/')}${req.trailingSlash ? '/' : ''}`)),
      },
    },
  ];
}
