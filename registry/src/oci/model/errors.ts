/**
 * The distribution-spec error model: every failure on `/v2/` is `{errors: [{code, message,
 * detail?}]}` with `Content-Type: application/json`, and each code has exactly one status.
 */

export const ERROR_STATUS = {
  NAME_UNKNOWN: 404,
  MANIFEST_UNKNOWN: 404,
  BLOB_UNKNOWN: 404,
  BLOB_UPLOAD_UNKNOWN: 404,
  DIGEST_INVALID: 400,
  MANIFEST_INVALID: 400,
  // An image manifest names a config or layer the target index does not hold.
  MANIFEST_BLOB_UNKNOWN: 400,
  // Distribution-spec codes for input that fails the grammar of a name or a tag.
  NAME_INVALID: 400,
  TAG_INVALID: 400,
  DENIED: 403,
  UNAUTHORIZED: 401,
  UNSUPPORTED: 405,
  // The distribution spec's code for 429: the layer-contents walk cap had no slot in time.
  TOOMANYREQUESTS: 429,
  UNKNOWN: 502,
} as const;

export type OciErrorCode = keyof typeof ERROR_STATUS;

export class OciError extends Error {
  readonly status: number;

  constructor(
    readonly code: OciErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
    readonly detail?: unknown,
  ) {
    super(message);
    this.name = 'OciError';
    this.status = ERROR_STATUS[code];
  }
}

/**
 * A failure that has a status but no distribution-spec code: out-of-order chunks and
 * unsatisfiable ranges (416), and the layer-contents route (415, 404, 416, 422). The body keeps
 * the OCI shape with a descriptive code so clients parse it the same way.
 */
export class OciStatusError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'OciStatusError';
  }
}

export function errorPayload(code: string, message: string, detail?: unknown): string {
  const entry: { code: string; message: string; detail?: unknown } = { code, message };
  if (detail !== undefined) entry.detail = detail;
  return JSON.stringify({ errors: [entry] });
}
