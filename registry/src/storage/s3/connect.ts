/**
 * Opens the `minio` client for `[storage] backend = "s3"` and checks, before the server starts,
 * that the bucket can be used: the endpoint answers, the keys are accepted, the bucket exists, and
 * the server honours the conditional writes the MetaStore's compare-and-swap is built on. Each
 * failure is one `ConfigError` naming the key to fix; no message carries a key's value.
 */
import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import * as https from 'node:https';
import { Client } from 'minio';
import { ConfigError } from '../../config/errors.js';
import type { StorageConfig } from '../../config/types.js';
import { errorCode, isNetworkError, isPreconditionFailed } from './errors.js';
import { S3Requests } from './requests.js';

/** Where the s3 backend's objects live, and the client that reaches them. */
export interface S3Location {
  client: Client;
  bucket: string;
  /** Key prefix inside the bucket: empty, or ending in `/`. */
  prefix: string;
  /** `scheme://host:port` for messages: never credentials. */
  endpoint: string;
  /** The lean path for reads and in-memory PUTs (`requests.ts`), on the client's agent. */
  requests: S3Requests;
}

export interface LocationOptions {
  /**
   * How long a request may wait for the response to begin before it fails with ETIMEDOUT (and
   * the caller with StoreUnavailableError). A store that stopped answering must not hold a
   * request, and the client that sent it, forever.
   */
  responseTimeoutMs?: number;
  /** How long a response that has begun may send nothing while its reader waits (`[storage] idle_timeout_secs`). */
  idleTimeoutMs?: number;
}

export interface ConnectOptions extends LocationOptions {
  /** How long the start-up checks may take before the endpoint counts as unreachable. */
  timeoutMs?: number;
}

const DEFAULT_REGION = 'us-east-1';
const DEFAULT_TIMEOUT_MS = 15_000;
const DEFAULT_RESPONSE_TIMEOUT_MS = 30_000;
const DEFAULT_IDLE_TIMEOUT_MS = 30_000;

/** The client and location from the config, without touching the network. */
export function s3Location(cfg: StorageConfig, opts: LocationOptions = {}): S3Location {
  const url = parseEndpoint(cfg.endpoint);
  if (!cfg.bucket) throw new ConfigError('storage.bucket', 'is required with backend = "s3"', 'set storage.bucket');
  if (!cfg.accessKey || !cfg.secretKey) {
    const missing = cfg.accessKey ? 'secret_key' : 'access_key';
    throw new ConfigError(`storage.${missing}`, 'is required with backend = "s3"', `set ${missing}, ${missing}_env or ${missing}_file`);
  }
  const tls = url.protocol === 'https:';
  // Kept-alive sockets: a document read is one small request, the handshake would dominate it.
  const agent = tls ? new https.Agent({ keepAlive: true, maxSockets: 64 }) : new http.Agent({ keepAlive: true, maxSockets: 64 });
  const responseTimeoutMs = opts.responseTimeoutMs ?? (cfg.responseTimeoutSecs !== undefined ? cfg.responseTimeoutSecs * 1000 : DEFAULT_RESPONSE_TIMEOUT_MS);
  const idleTimeoutMs = opts.idleTimeoutMs ?? (cfg.idleTimeoutSecs !== undefined ? cfg.idleTimeoutSecs * 1000 : DEFAULT_IDLE_TIMEOUT_MS);
  const transport = answeringWithin(tls ? https : http, responseTimeoutMs, idleTimeoutMs);
  const address = clientAddress(url, cfg);
  const options = {
    ...address,
    transportAgent: agent,
    transport,
    // The client would retry a 5xx once and print to the console doing it; a retried conditional
    // write can also report a conflict with itself. Callers decide about retries (updateDoc does).
    retryOptions: { disableRetry: true },
  };
  const client = new Client(options);
  const requests = new S3Requests(
    { url, bucket: cfg.bucket, region: address.region, accessKey: address.accessKey, secretKey: address.secretKey },
    agent,
    (options, callback) => transport.request(options, callback),
  );
  return { client, bucket: cfg.bucket, prefix: normalisePrefix(cfg.prefix), endpoint: `${url.protocol}//${url.host}`, requests };
}

/**
 * What a client needs to sign requests for `url` with the configured keys. A client with only
 * these signs offline: the fixed region spares it the bucket-location lookup.
 */
function clientAddress(url: URL, cfg: StorageConfig) {
  const tls = url.protocol === 'https:';
  return {
    endPoint: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (tls ? 443 : 80) : Number(url.port),
    useSSL: tls,
    accessKey: cfg.accessKey?.reveal() ?? '',
    secretKey: cfg.secretKey?.reveal() ?? '',
    // MinIO and most S3 services behind a Kubernetes Service have no per-bucket DNS names.
    pathStyle: true,
    // A fixed region spares the client its bucket-location lookup before the first request.
    region: cfg.region ?? DEFAULT_REGION,
  };
}

/**
 * A client that only presigns URLs for clients that reach the object store at `endpoint` (the
 * `storage.redirect_endpoint` key): a signature covers the host, so it is made for theirs.
 */
export function presigningClient(cfg: StorageConfig, endpoint: string): Client {
  return new Client(clientAddress(parseEndpoint(endpoint, 'storage.redirect_endpoint'), cfg));
}

/**
 * The client's transport (`http` or `https`) with two limits, each failing the request (or its
 * body) with ETIMEDOUT:
 * - `responseMs`: no response has begun within it;
 * - `idleMs`: a body that has begun sends nothing for that long while nothing it sent is waiting
 *   to be read. A body read slowly (its consumer applies backpressure: bytes sit in its buffer)
 *   is never cut: it is the reader, not the store, that is slow.
 */
function answeringWithin(transport: typeof http | typeof https, responseMs: number, idleMs: number): Pick<typeof http, 'request'> {
  const idle = new IdleWatch(idleMs);
  const request = ((options: http.RequestOptions, callback?: (res: http.IncomingMessage) => void) => {
    const req = transport.request(options, callback);
    const timer = setTimeout(() => req.destroy(Object.assign(new Error(`no response within ${responseMs} ms`), { code: 'ETIMEDOUT' })), responseMs);
    const clear = () => clearTimeout(timer);
    req.once('response', (res: http.IncomingMessage) => {
      clear();
      idle.watch(res);
    });
    req.once('close', clear);
    return req;
  }) as typeof http.request;
  return { request };
}

/**
 * Destroys a response body once it has neither received a byte nor held an unread one for
 * `idleMs`. One timer for every body in flight (a warm read makes several small ones: a timer
 * each would be work on the hot path), ticking every half limit while any is watched, so a stall
 * ends between 1 and 1.5 times the limit.
 */
class IdleWatch {
  readonly #bodies = new Map<http.IncomingMessage, { bytesRead: number; since: number }>();
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly idleMs: number) {}

  watch(res: http.IncomingMessage): void {
    this.#bodies.set(res, { bytesRead: res.socket?.bytesRead ?? 0, since: Date.now() });
    const forget = () => this.#forget(res);
    res.once('end', forget);
    res.once('close', forget);
    res.once('error', forget);
    if (!this.#timer) {
      this.#timer = setInterval(() => this.#check(), Math.max(1, Math.floor(this.idleMs / 2)));
      this.#timer.unref();
    }
  }

  #forget(res: http.IncomingMessage): void {
    this.#bodies.delete(res);
    if (this.#bodies.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  #check(): void {
    const now = Date.now();
    for (const [res, seen] of this.#bodies) {
      // Everything arrived: whatever happens next is the reader's business.
      if (res.complete) {
        this.#forget(res);
        continue;
      }
      const bytesRead = res.socket?.bytesRead ?? seen.bytesRead;
      if (bytesRead !== seen.bytesRead || res.readableLength > 0) {
        seen.bytesRead = bytesRead;
        seen.since = now;
      } else if (now - seen.since >= this.idleMs) {
        this.#forget(res);
        res.destroy(Object.assign(new Error(`the object store sent nothing for ${this.idleMs} ms`), { code: 'ETIMEDOUT' }));
      }
    }
  }
}

/** `s3Location`, then the start-up checks; resolves only when the bucket is usable. */
export async function connectS3(cfg: StorageConfig, opts: ConnectOptions = {}): Promise<S3Location> {
  const loc = s3Location(cfg, opts);
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ConfigError('storage.endpoint', `${loc.endpoint} did not answer within ${timeoutMs / 1000} s`, 'check storage.endpoint and that the object store is reachable from here')),
      timeoutMs,
    );
  });
  try {
    await Promise.race([checkAccess(loc), timeout]);
    await Promise.race([checkConditionalWrites(loc), timeout]);
  } finally {
    clearTimeout(timer);
  }
  return loc;
}

/** One listing request proves the endpoint answers, the keys are accepted and the bucket exists. */
async function checkAccess(loc: S3Location): Promise<void> {
  try {
    await loc.client.listObjectsV2Query(loc.bucket, `${loc.prefix}meta/`, '', '', 1, '');
  } catch (err) {
    throw startupError(err, loc, 'list');
  }
}

/**
 * Creates a probe object twice with `If-None-Match: *`: the second write must be refused (412).
 * A service that ignores the condition would let two processes both "create" one document, and
 * every compare-and-swap on top of it would lose updates in silence; such a store is refused here.
 */
async function checkConditionalWrites(loc: S3Location): Promise<void> {
  const key = `${loc.prefix}probe/${randomUUID()}`;
  const create = () => loc.client.putObject(loc.bucket, key, Buffer.from('{}'), 2, { 'If-None-Match': '*', 'Content-Type': 'application/json' });
  try {
    await create();
  } catch (err) {
    throw startupError(err, loc, 'write');
  }
  try {
    await create();
  } catch (err) {
    if (!isPreconditionFailed(err)) throw startupError(err, loc, 'write');
    await loc.client.removeObject(loc.bucket, key).catch(() => undefined);
    return;
  }
  await loc.client.removeObject(loc.bucket, key).catch(() => undefined);
  throw new ConfigError(
    'storage.endpoint',
    `${loc.endpoint} ignores conditional writes (a second PUT with If-None-Match: * replaced the object instead of failing with 412)`,
    'use an object store that honours If-Match and If-None-Match on PUT (MinIO, AWS S3, and others); without them concurrent writers lose updates',
  );
}

/** The one message for a failed start-up request; `action` is what the keys were used for. */
function startupError(err: unknown, loc: S3Location, action: 'list' | 'write'): ConfigError {
  const code = errorCode(err);
  const bucket = `bucket "${loc.bucket}" at ${loc.endpoint}`;
  if (isNetworkError(err)) {
    return new ConfigError('storage.endpoint', `cannot reach ${loc.endpoint} (${code})`, 'check storage.endpoint and that the object store is running and reachable from here');
  }
  switch (code) {
    case 'NoSuchBucket':
      return new ConfigError('storage.bucket', `${bucket} does not exist`, 'create the bucket, or set storage.bucket to an existing one');
    case 'InvalidAccessKeyId':
      return new ConfigError('storage.access_key', `${loc.endpoint} does not know the access key (InvalidAccessKeyId)`, 'check the access key that storage.access_key names');
    case 'SignatureDoesNotMatch':
      return new ConfigError('storage.secret_key', `${loc.endpoint} refused the secret key for the access key (SignatureDoesNotMatch)`, 'check the secret key that storage.secret_key names');
    case 'AccessDenied':
      return new ConfigError(
        'storage.access_key',
        `the keys may not ${action} in ${bucket} (AccessDenied)`,
        'grant the keys s3:ListBucket on the bucket and s3:GetObject, s3:PutObject, s3:DeleteObject on its objects',
      );
    case 'AuthorizationHeaderMalformed':
    case 'InvalidRegion':
      return new ConfigError('storage.region', `${loc.endpoint} refused the region (${code})`, 'set storage.region to the bucket\'s region');
  }
  const what = code ?? (err instanceof Error ? err.message.split('\n')[0] : String(err));
  return new ConfigError('storage', `${bucket} cannot be used: ${action} failed (${what})`, 'check storage.endpoint, storage.bucket and the keys');
}

function parseEndpoint(endpoint: string | undefined, key = 'storage.endpoint'): URL {
  const fix = 'give the object store\'s base URL, like http://minio.storage.svc:9000';
  if (!endpoint) throw new ConfigError(key, 'is required with backend = "s3"', fix);
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new ConfigError(key, `"${endpoint}" is not a URL`, fix);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(key, `must be http or https, not ${url.protocol}`, fix);
  // Credentials belong in the key settings (secrets), never in a URL that ends up in messages.
  if (url.username !== '' || url.password !== '') throw new ConfigError(key, 'must not carry credentials', 'move them to storage.access_key and storage.secret_key');
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '') {
    throw new ConfigError(key, 'must have no path, query or fragment (the bucket is storage.bucket, a key prefix is storage.prefix)', fix);
  }
  return url;
}

/** `""` or `a/b/`: a prefix names a folder of the bucket, so it always ends in one slash. */
function normalisePrefix(prefix: string): string {
  const trimmed = prefix.replace(/\/+$/, '');
  if (trimmed === '') return '';
  if (trimmed.startsWith('/') || trimmed.split('/').some((s) => s === '' || s === '.' || s === '..')) {
    throw new ConfigError('storage.prefix', `"${prefix}" is not a clean key prefix`, 'use segments separated by single slashes, like "velodex/prod"');
  }
  return `${trimmed}/`;
}
