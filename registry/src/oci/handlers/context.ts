/** What every `/v2/` handler gets: the server, the member readers, the upload sessions, its blob holds. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IndexConfig } from '../../config/types.js';
import type { ServerContext } from '../../ecosystem/ecosystem.js';
import type { Target } from './access.js';
import type { BlobBytes } from '../read/blob-bytes.js';
import type { BlobSizes } from '../read/blob-sizes.js';
import type { IndexHolds } from '../read/index-holds.js';
import type { Members } from '../read/virtual/members.js';
import type { Credentials } from './token/credentials.js';
import type { TokenSigner } from './token/tokens.js';
import type { UploadSessions } from '../read/uploads/upload-sessions.js';

export interface OciDeps {
  ctx: ServerContext;
  members: Members;
  /** Bytes of manifests and small blobs by digest (immutable): warm GETs of them read no file. */
  blobBytes: BlobBytes;
  /** Sizes of blobs seen by this process (immutable per digest): a warm blob GET in one round trip. */
  blobSizes: BlobSizes;
  sessions: UploadSessions;
  ociIndexes: IndexConfig[];
  /** The holds of repositories (hosted) and indexes (cached) on shared blobs: what each one sees. */
  holds: IndexHolds;
  /** Signs and verifies the token realm's bearer tokens. */
  tokens: TokenSigner;
}

/** One `/v2/` request before its `<name>` is resolved (the version check and the catalog have none). */
export interface OciExchange {
  deps: OciDeps;
  query: URLSearchParams;
  request: FastifyRequest;
  reply: FastifyReply;
  /** What `Authorization` carried; a bearer token is already verified. */
  credentials: Credentials;
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

const MEDIA_TYPE = /^\s*[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(?:;.*)?$/s;

/**
 * The distribution API reads bodies as streams whatever their Content-Type, but fastify answers
 * 415, outside the OCI error model, to a header that is not `type/subtype` (an empty one
 * included) before any handler runs. Such a header names no media type, so it is dropped and the
 * request goes on as if it had none: a manifest PUT then takes the body's `mediaType`.
 */
export function dropMalformedContentType(request: FastifyRequest): void {
  const value = request.raw.headers['content-type'];
  if (value !== undefined && !MEDIA_TYPE.test(value)) delete request.raw.headers['content-type'];
}
