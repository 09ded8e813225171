/**
 * Which index a `<name>` addresses, and whether a write to it is allowed. The longest OCI index
 * route that aligns with whole segments of `<name>` wins; the rest is the repository.
 */
import type { FastifyRequest } from 'fastify';
import type { HostedIndex, IndexConfig } from '../config/types.js';
import { BASIC_CHALLENGE, checkWrite, noteWriteDenial, WRITE_DENIAL_MESSAGES } from '../http/auth.js';
import type { ServerContext } from '../http/ecosystem.js';
import { resolveRoute } from '../http/resolve.js';
import { writeTarget } from '../roles/write-target.js';
import { OciError } from './errors.js';
import { checkName } from './names.js';

export interface Target {
  index: IndexConfig;
  /** The repository path under the index route. */
  repo: string[];
  /** The full `<name>` as the client wrote it (route + repository). */
  name: string;
}

export function resolveName(ociIndexes: readonly IndexConfig[], segments: readonly string[]): Target {
  checkName(segments);
  const hit = resolveRoute(ociIndexes, segments);
  const name = segments.join('/');
  if (!hit) throw new OciError('NAME_UNKNOWN', `no OCI index serves "${name}": names start with an OCI index route`);
  if (hit.rest.length === 0) {
    throw new OciError('NAME_UNKNOWN', `"${name}" is the route of index "${hit.index.name}"; add a repository name after it`);
  }
  return { index: hit.index, repo: hit.rest, name };
}

/** The hosted index that receives a write to `index`, or an UNAUTHORIZED / DENIED error. */
export function authorizeWrite(ctx: ServerContext, index: IndexConfig, request: FastifyRequest): HostedIndex {
  const target = writeTarget(index, ctx.indexByName);
  const check = checkWrite(target, request.headers.authorization);
  if (check.ok && target) return target;
  const reason = check.ok ? 'read-only' : check.reason;
  noteWriteDenial(request, ctx.clientAddress, index, reason);
  if (reason === 'missing-credentials' || reason === 'wrong-credentials') {
    throw new OciError('UNAUTHORIZED', WRITE_DENIAL_MESSAGES[reason], { 'WWW-Authenticate': BASIC_CHALLENGE });
  }
  throw new OciError('DENIED', `index "${index.name}": ${WRITE_DENIAL_MESSAGES[reason]}`);
}
