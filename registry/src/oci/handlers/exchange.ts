/**
 * One `/v2/` request as a handler sees it: before its `<name>` is resolved (`OciExchange`: the
 * version check, the catalog and the token realm have none) and after (`OciCall`, with the index
 * and repository the name addresses, `access.ts` `resolveName`).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IndexConfig } from '../../config/types.js';
import type { OciDeps } from './deps.js';
import type { Namespace } from '../model/namespace.js';
import type { Credentials } from './token/credentials.js';

export interface OciExchange {
  deps: OciDeps;
  query: URLSearchParams;
  request: FastifyRequest;
  reply: FastifyReply;
  /** What `Authorization` carried; a bearer token is already verified. */
  credentials: Credentials;
  /** The upstream registry the request names (`?ns=`), which decides what its `<name>` addresses (mirror.ts). */
  namespace: Namespace;
}

/** Which index a `<name>` addresses, and the repository under its route. */
export interface Target {
  index: IndexConfig;
  /** The repository path under the index route. */
  repo: string[];
  /** The full `<name>` as the client wrote it (route + repository). */
  name: string;
}

export interface OciCall extends OciExchange {
  target: Target;
}
