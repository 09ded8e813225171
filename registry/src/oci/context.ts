/** What every `/v2/` handler gets: the server, the member readers, the upload sessions, its blob holds. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IndexConfig } from '../config/types.js';
import type { ServerContext } from '../http/ecosystem.js';
import type { Holder } from '../storage/holds.js';
import type { Target } from './access.js';
import type { ManifestBytes } from './manifest-bytes.js';
import type { Members } from './members.js';
import type { UploadSessions } from './upload-sessions.js';

export interface OciDeps {
  ctx: ServerContext;
  members: Members;
  manifestBytes: ManifestBytes;
  sessions: UploadSessions;
  ociIndexes: IndexConfig[];
  /** The OCI API's holds on shared blobs: a blob is visible on /v2 iff it is held here. */
  holds: Holder;
}

/** One `/v2/` request before its `<name>` is resolved (the version check and the catalog have none). */
export interface OciExchange {
  deps: OciDeps;
  query: URLSearchParams;
  request: FastifyRequest;
  reply: FastifyReply;
}

export interface OciCall extends OciExchange {
  target: Target;
}

export const OCTET_STREAM = 'application/octet-stream';

export function blobLocation(name: string, hex: string): string {
  return `/v2/${name}/blobs/sha256:${hex}`;
}

export function manifestLocation(name: string, hex: string): string {
  return `/v2/${name}/manifests/sha256:${hex}`;
}

export function uploadLocation(name: string, session: string): string {
  return `/v2/${name}/blobs/uploads/${session}`;
}

/** The `Range` header of an upload: the inclusive span received so far (`0-0` when empty, as distribution does). */
export function uploadRange(size: number): string {
  return `0-${Math.max(size - 1, 0)}`;
}

/** True when the request carries a body (a length above zero, or chunked transfer). */
export function hasBody(request: FastifyRequest): boolean {
  const len = request.headers['content-length'];
  if (len !== undefined) return Number(len) > 0;
  return request.headers['transfer-encoding'] !== undefined;
}
