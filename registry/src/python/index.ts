/** The Python ecosystem (PEP 503/691 Simple API, uploads, legacy JSON). */
import type { Ecosystem, ServerContext } from '../http/ecosystem.js';
import { HttpError } from '../http/errors.js';

export function createPythonEcosystem(_ctx: ServerContext): Ecosystem {
  return {
    id: 'python',
    async handleIndexRequest(req) {
      throw new HttpError(404, `not found: /${[req.index.route, ...req.rest].join('/')}`);
    },
  };
}
