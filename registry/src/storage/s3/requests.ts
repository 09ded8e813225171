/**
 * The lean path for the requests a request's reads and writes are made of: a document GET (with
 * `If-None-Match` when a copy is kept), a blob HEAD, a blob GET, and the PUTs of a document (in
 * memory), a blob of one part and a part (a slice of a stage's local file, read as it is sent).
 * One request signed with AWS Signature V4 by `aws4` (which keeps the derived signing key for the
 * day), sent on the location's kept-alive agent and response timeout, and its answer handed back
 * as it streams.
 *
 * Why beside the `minio` client, which does everything else (multipart bookkeeping, listings,
 * copies, deletes, presigning): for each request that client validates its arguments, derives the
 * signing key again (four HMACs), hashes the body (sha256 and, for `putObject`, MD5) and builds
 * its options anew. A warm manifest GET on s3 is three such reads, and that work cost this process
 * about 0.19 ms of CPU per read where this path costs about 0.11 ms (and MinIO spends about 0.3 ms
 * answering); a small PUT cost about 0.37 ms there and 0.22 ms here, and a cold pull of six images
 * makes about a hundred of them. On a pod whose CPU is shared with its requests, that is most of
 * what velodex itself spends on them.
 *
 * A refusal comes back as an error carrying the S3 error code, as the client's do (`errors.ts`
 * reads only `code`): the `<Code>` of the error document, or for a HEAD, which has no body, the
 * code its status means.
 */
import { open } from 'node:fs/promises';
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import aws4 from 'aws4';

/** sha256 of the empty body: what a GET or HEAD signs as its payload. */
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
/** What a body signs as its payload when only a checksum header guards it. */
const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';

/** An error document is a few hundred bytes; more is not read. */
const MAX_ERROR_BODY = 64 * 1024;

/**
 * Bytes read from a file per write to the socket when a body is sent from a file: few reads and
 * writes for a part of 8 MiB, and what such a body holds in memory at once.
 */
const FILE_READ_BYTES = 1024 * 1024;

/** How a request is sent: `http.request` or `https.request` with the response deadline (connect.ts). */
export type Send = (options: RequestOptions, callback: (res: IncomingMessage) => void) => ClientRequest;

export interface S3RequestTarget {
  /** `http:` or `https:`, host and port of the store. */
  url: URL;
  bucket: string;
  region: string;
  accessKey: string;
  secretKey: string;
}

/** A refusal of the store: `code` as S3 names it (`NoSuchKey`, `PreconditionFailed`, ...). */
export class S3RequestError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
  ) {
    super(`the object store answered ${status} ${code}`);
    this.name = 'S3RequestError';
  }
}

/** `length` bytes of the local file at `path`, from `start`: a body sent straight from the file. */
export interface FileSlice {
  path: string;
  start: number;
  length: number;
}

/** A PUT's body, in memory or in a local file, and what guards it on the way. */
export interface PutBody {
  bytes: Buffer | FileSlice;
  /**
   * The body's sha256 (hex), when known: signed as the payload over http, so the store refuses
   * other bytes. Without it (or over https, where TLS guards the way) the payload is signed
   * `UNSIGNED-PAYLOAD`, and a checksum header the caller adds is what the store checks.
   */
  sha256?: string;
}

export class S3Requests {
  readonly #credentials: { accessKeyId: string; secretAccessKey: string };
  /**
   * Whether a body's known sha256 is signed as its payload: over http, as the `minio` client does;
   * over https it signs `UNSIGNED-PAYLOAD`. (A test sets it to send as over https.)
   */
  signsPayload: boolean;

  constructor(
    private readonly target: S3RequestTarget,
    private readonly agent: RequestOptions['agent'],
    private readonly send: Send,
  ) {
    this.#credentials = { accessKeyId: target.accessKey, secretAccessKey: target.secretKey };
    this.signsPayload = target.url.protocol === 'http:';
  }

  /**
   * Sends `method` for the object `key` (with `query`, without its `?`, and `body` for a PUT) and
   * resolves with the response once its status is one of `expect`; any other status rejects with
   * `S3RequestError` (its body read and dropped). The caller consumes or destroys the response.
   */
  request(method: 'GET' | 'HEAD' | 'PUT', key: string, headers: Record<string, string>, expect: readonly number[], body?: PutBody, query = ''): Promise<IncomingMessage> {
    const { url, bucket, region } = this.target;
    const payload = body === undefined ? EMPTY_SHA256 : this.signsPayload && body.sha256 !== undefined ? body.sha256 : UNSIGNED_PAYLOAD;
    const signed = aws4.sign(
      {
        host: url.host,
        path: `/${encodeSegment(bucket)}/${key.split('/').map(encodeSegment).join('/')}${query === '' ? '' : `?${query}`}`,
        method,
        service: 's3',
        region,
        headers: { ...headers, ...(body === undefined ? {} : { 'Content-Length': String(body.bytes.length) }), 'X-Amz-Content-Sha256': payload },
      },
      this.#credentials,
    );
    return new Promise<IncomingMessage>((resolve, reject) => {
      const req = this.send(
        { protocol: url.protocol, hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port, method, path: signed.path, headers: signed.headers as Record<string, string>, agent: this.agent },
        (res) => {
          if (res.statusCode !== undefined && expect.includes(res.statusCode)) return resolve(res);
          refusal(res).then(reject, reject);
        },
      );
      req.once('error', reject);
      const bytes = body?.bytes;
      if (bytes === undefined || Buffer.isBuffer(bytes)) req.end(bytes);
      // A file that fails destroys `req` with its error, which rejects through 'error' above.
      else sendFileSlice(bytes, req).catch((err: Error) => req.destroy(err));
    });
  }
}

/**
 * Sends `slice` as the body of `req`, read from the file into one buffer of at most a megabyte,
 * which is read into again once the socket has taken what it held (a small slice: one read, one
 * write). Fails if the file holds fewer bytes than the slice's length (which its `Content-Length`
 * announced: the store would otherwise wait for the rest until a timeout).
 */
async function sendFileSlice(slice: FileSlice, req: ClientRequest): Promise<void> {
  if (slice.length === 0) {
    req.end();
    return;
  }
  const file = await open(slice.path, 'r');
  try {
    const buffer = Buffer.allocUnsafe(Math.min(FILE_READ_BYTES, slice.length));
    let sent = 0;
    for (;;) {
      const { bytesRead } = await file.read(buffer, 0, Math.min(buffer.length, slice.length - sent), slice.start + sent);
      if (bytesRead === 0) throw new Error(`${slice.path} ended after ${sent} of the ${slice.length} bytes from ${slice.start} to send`);
      sent += bytesRead;
      const chunk = buffer.subarray(0, bytesRead);
      if (sent === slice.length) {
        req.end(chunk);
        return;
      }
      await new Promise<void>((resolve, reject) => req.write(chunk, (err) => (err ? reject(err) : resolve())));
    }
  } finally {
    await file.close();
  }
}

/** The error a response that is not an answer stands for. */
async function refusal(res: IncomingMessage): Promise<S3RequestError> {
  const status = res.statusCode ?? 0;
  let text = '';
  for await (const chunk of res) {
    text += (chunk as Buffer).toString('utf8');
    // Enough for the code: the rest is not waited for (the socket is dropped, not reused).
    if (text.length >= MAX_ERROR_BODY) {
      res.destroy();
      break;
    }
  }
  const code = /<Code>([^<]{1,128})<\/Code>/.exec(text)?.[1] ?? codeOfStatus(status);
  return new S3RequestError(code, status);
}

/** A HEAD's refusal has no body: the code its status means, as S3 would have named it. */
function codeOfStatus(status: number): string {
  if (status === 404) return 'NotFound';
  if (status === 412) return 'PreconditionFailed';
  if (status === 403) return 'AccessDenied';
  if (status === 503) return 'SlowDown';
  if (status >= 500) return 'InternalError';
  return `Http${status}`;
}

/** RFC 3986 encoding of one path segment, as Signature V4 wants it (and the store decodes it). */
function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
