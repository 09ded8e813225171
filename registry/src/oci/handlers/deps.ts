/**
 * What every `/v2/` handler is given (oci/index.ts builds it once): the member readers, the upload
 * sessions, the holds, and each shared service a handler uses, by name; never the whole
 * `ServerContext`.
 */
import type { FastifyRequest } from 'fastify';
import type { ArchiveWalks } from '../../archive/walks.js';
import type { IndexConfig } from '../../config/types.js';
import type { OriginOf } from '../../ecosystem/ecosystem.js';
import type { EventSink } from '../../events/types.js';
import type { UsageCounters } from '../../observe/counters.js';
import type { IndexSummaries } from '../../observe/summary.js';
import type { QuotaUsage } from '../../roles/quota.js';
import type { BlobRedirect, BlobStore } from '../../storage/types.js';
import type { BlobBytes } from '../read/blob-bytes.js';
import type { BlobSizes } from '../read/blob-sizes.js';
import type { IndexHolds } from '../read/index-holds.js';
import type { UploadSessions } from '../read/uploads/upload-sessions.js';
import type { Members } from '../read/virtual/members.js';
import type { TokenSigner } from './token/tokens.js';

/** The registries this endpoint mirrors (`[[mirror]]`), by canonical host, and how their aliases fold (mirror.ts). */
export interface Mirrors {
  byRegistry: ReadonlyMap<string, IndexConfig>;
  aliases: Readonly<Record<string, string>>;
}

export interface OciDeps {
  /** The OCI indexes: where a `<name>` is resolved, and what the catalog lists. */
  ociIndexes: IndexConfig[];
  /** Every index by name: a virtual index's upload target. */
  indexByName: ReadonlyMap<string, IndexConfig>;
  /** `[[mirror]]`: the registries this endpoint mirrors, each served by its cached index. */
  mirrors: Mirrors;
  members: Members;
  /** The shared content-addressed store. */
  blobs: BlobStore;
  /** Where clients may fetch large stored blobs themselves (s3 with `redirect = true`); null: never. */
  redirect: BlobRedirect | null;
  /** Bytes of manifests and small blobs by digest (immutable): warm GETs of them read no file. */
  blobBytes: BlobBytes;
  /** Sizes of blobs seen by this process (immutable per digest): a warm blob GET in one round trip. */
  blobSizes: BlobSizes;
  sessions: UploadSessions;
  /** The holds of repositories (hosted) and indexes (cached) on shared blobs: what each one sees. */
  holds: IndexHolds;
  /** Signs and verifies the token realm's bearer tokens. */
  tokens: TokenSigner;
  /** The usage counters of `/+stats`, per index route. */
  counters: UsageCounters;
  /** The per-index summaries of `/+status`: a manifest write records itself there. */
  summaries: IndexSummaries;
  /** Webhook events: a DELETE sends `delete` once it has committed (removal.ts). */
  events: EventSink;
  /** The cap on archive walks and the listings cache (layer contents). */
  archiveWalks: ArchiveWalks;
  /** The client's address (trusted proxies resolved), for the security log. */
  clientAddress: (request: FastifyRequest) => string;
  /** The origin the client reached the server at: where a challenge sends it for a token. */
  originOf: OriginOf;
  /** What each index holds: the quotas of hosted indexes (quota.ts). */
  usage: QuotaUsage;
  /** When a cached index's blobs were last downloaded: its budget evicts the least recent. */
  recentUse: { downloaded(index: IndexConfig, hex: string, size: number): void };
}
