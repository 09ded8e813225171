/** What every `/v2/` handler is given: the server, the member readers, the upload sessions, its blob holds. */
import type { IndexConfig } from '../../config/types.js';
import type { ServerContext } from '../../ecosystem/ecosystem.js';
import type { BlobBytes } from '../read/blob-bytes.js';
import type { BlobSizes } from '../read/blob-sizes.js';
import type { IndexHolds } from '../read/index-holds.js';
import type { UploadSessions } from '../read/uploads/upload-sessions.js';
import type { Members } from '../read/virtual/members.js';
import type { TokenSigner } from './token/tokens.js';

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
