/**
 * The HTTP client a cached index uses to reach its upstream. One GET (or HEAD) with a streamed
 * body, a deadline for the response headers, an idle deadline for the body, redirects followed by
 * hand (so credentials, the configured ones and a caller's `authorization`, go only to the origin
 * first asked), Basic credentials from the index's
 * Secrets, and conditional headers for revalidation.
 *
 * Credentials and query strings never appear in an error message or in a URL this module hands
 * out for logging: every URL shown passes through `displayUrl`.
 *
 * Every status is returned, not thrown: a 404 or a 401 challenge is an answer the caller reads.
 * Only a failure to get an answer (connect error, timeout, redirect loop, egress refused) throws
 * an `UpstreamError` (roles/upstream-error.ts) of that kind.
 * The caller must consume or destroy `body` of every response: it holds a connection and, with an
 * `UpstreamSlots` cap, an upstream slot until it closes.
 */
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { displayUrl } from '../config/sanitize.js';
import type { Secret } from '../config/secret.js';
import type { UpstreamSlots } from '../limits/upstream-slots.js';
import { type Egress } from './egress.js';
import { UpstreamError } from './upstream-error.js';

export const DEFAULT_HEADERS_TIMEOUT_MS = 30_000;
export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_REDIRECTS = 5;

export interface UpstreamClientOptions {
  /** The upstream base URL (`cached = ...`). User info in it is used as credentials, never shown. */
  baseUrl: string;
  username?: Secret;
  password?: Secret;
  /** Connect plus response headers must take no longer than this. */
  headersTimeoutMs?: number;
  /** The body may go silent for no longer than this. */
  idleTimeoutMs?: number;
  maxRedirects?: number;
  /** Caps concurrent fetches; a slot is held from the request until the body closes. */
  slots?: UpstreamSlots;
  userAgent?: string;
  /** Which hosts a request (or a redirect) may go to (roles/egress.ts); absent: any. */
  egress?: Egress;
  /** Certificate authorities (PEM) trusted for https instead of the system's: a cluster's own CA. */
  ca?: string;
  /**
   * Told of every answer of the origin first asked (not of a host a redirect led to): its status
   * and headers, for the upstream's health to read its pressure (roles/upstream-health.ts).
   */
  onAnswer?: (status: number, headers: IncomingHttpHeaders) => void;
}

export interface UpstreamRequest {
  method?: 'GET' | 'HEAD';
  /** Extra request headers. An `authorization` here replaces the Basic credentials. */
  headers?: Record<string, string>;
  /** Sent as `If-None-Match`. */
  etag?: string;
  /** Sent as `If-Modified-Since` (an HTTP date, as the upstream sent it). */
  lastModified?: string;
  signal?: AbortSignal;
}

export interface UpstreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** The final URL after redirects as `displayUrl` shows it: fit for logs and messages. */
  url: string;
  /** The final URL after redirects, as fetched: for resolving relative links. Do not log it. */
  rawUrl: string;
  body: Readable;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

interface Credentials {
  origin: string;
  authorization: string;
}

export class UpstreamClient {
  readonly baseUrl: URL;
  readonly #credentials: Credentials | undefined;
  readonly #headersTimeoutMs: number;
  readonly #idleTimeoutMs: number;
  readonly #maxRedirects: number;
  readonly #slots: UpstreamSlots | undefined;
  readonly #userAgent: string;
  readonly #egress: Egress | undefined;
  readonly #agents: { 'http:': http.Agent; 'https:': https.Agent };
  readonly #onAnswer: UpstreamClientOptions['onAnswer'];

  constructor(opts: UpstreamClientOptions) {
    this.#agents = {
      'http:': new http.Agent({ keepAlive: true }),
      'https:': new https.Agent({ keepAlive: true, ...(opts.ca !== undefined ? { ca: opts.ca } : {}) }),
    };
    const base = new URL(opts.baseUrl);
    const user = opts.username?.reveal() ?? decodeURIComponent(base.username);
    const pass = opts.password?.reveal() ?? decodeURIComponent(base.password);
    base.username = '';
    base.password = '';
    this.baseUrl = base;
    this.#credentials =
      user !== '' || pass !== ''
        ? { origin: base.origin, authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` }
        : undefined;
    this.#headersTimeoutMs = opts.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
    this.#idleTimeoutMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.#maxRedirects = opts.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
    this.#slots = opts.slots;
    this.#userAgent = opts.userAgent ?? 'velodex';
    this.#egress = opts.egress;
    this.#onAnswer = opts.onAnswer;
  }

  /** The base URL fit for logs and status documents. */
  get displayUrl(): string {
    return displayUrl(this.baseUrl.toString());
  }

  /** Fetches `target` (absolute, or relative to the base URL). */
  async get(target: string | URL, req: UpstreamRequest = {}): Promise<UpstreamResponse> {
    const release = this.#slots ? await this.#slots.acquire(req.signal) : undefined;
    try {
      let url = new URL(target, this.baseUrl);
      const firstOrigin = url.origin;
      for (let hop = 0; ; hop++) {
        const res = await this.#once(url, req, firstOrigin);
        if (this.#onAnswer && url.origin === firstOrigin) this.#onAnswer(res.statusCode ?? 0, res.headers);
        const location = res.headers.location;
        if (!REDIRECTS.has(res.statusCode ?? 0) || location === undefined) {
          if (release) res.once('close', release);
          return {
            status: res.statusCode ?? 0,
            headers: res.headers,
            url: displayUrl(url.toString()),
            rawUrl: url.toString(),
            body: res,
          };
        }
        res.resume();
        if (hop >= this.#maxRedirects) throw new UpstreamError('redirect', url.toString(), `more than ${this.#maxRedirects} redirects`);
        url = new URL(location, url);
        if (url.protocol !== 'http:' && url.protocol !== 'https:') {
          throw new UpstreamError('redirect', url.toString(), 'redirect to a scheme other than http(s)');
        }
      }
    } catch (err) {
      release?.();
      throw err;
    }
  }

  /** Closes idle keep-alive connections. */
  close(): void {
    this.#agents['http:'].destroy();
    this.#agents['https:'].destroy();
  }

  #headers(url: URL, req: UpstreamRequest, firstOrigin: string): Record<string, string> {
    const headers: Record<string, string> = {
      'user-agent': this.#userAgent,
      // Identity only: digests are of the stored bytes, so nothing may be transformed in transit.
      'accept-encoding': 'identity',
    };
    // Credentials go to the configured origin only, never to a host a redirect points at.
    if (this.#credentials && url.origin === this.#credentials.origin) headers.authorization = this.#credentials.authorization;
    if (req.etag !== undefined) headers['if-none-match'] = req.etag;
    if (req.lastModified !== undefined) headers['if-modified-since'] = req.lastModified;
    for (const [k, v] of Object.entries(req.headers ?? {})) {
      // A caller's own credentials (a bearer token) belong to the origin it asked; a redirect to
      // a CDN or a signed object-store URL gets none (they refuse a second credential).
      if (k.toLowerCase() === 'authorization' && url.origin !== firstOrigin) continue;
      headers[k.toLowerCase()] = v;
    }
    return headers;
  }

  #once(url: URL, req: UpstreamRequest, firstOrigin: string): Promise<IncomingMessage> {
    const agent = url.protocol === 'https:' ? this.#agents['https:'] : url.protocol === 'http:' ? this.#agents['http:'] : undefined;
    if (!agent) return Promise.reject(new UpstreamError('connect', url.toString(), `unsupported scheme ${url.protocol}`));
    const shown = url.toString();
    let admitted: ReturnType<Egress['admit']> = {};
    try {
      if (this.#egress) admitted = this.#egress.admit(url);
    } catch (err) {
      return Promise.reject(new UpstreamError('refused', shown, (err as Error).message));
    }
    return new Promise<IncomingMessage>((resolve, reject) => {
      const request = (url.protocol === 'https:' ? https : http).request(url, {
        method: req.method ?? 'GET',
        headers: this.#headers(url, req, firstOrigin),
        agent,
        ...admitted,
      });
      let settled = false;
      const fail = (err: UpstreamError): void => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        req.signal?.removeEventListener('abort', onAbort);
        request.destroy();
        reject(err);
      };
      const deadline = setTimeout(
        () => fail(new UpstreamError('timeout', shown, `no response headers within ${this.#headersTimeoutMs} ms`)),
        this.#headersTimeoutMs,
      );
      const onAbort = (): void => fail(new UpstreamError('aborted', shown, 'request aborted'));
      req.signal?.addEventListener('abort', onAbort, { once: true });
      request.on('error', (err: NodeJS.ErrnoException) =>
        fail(err.code === 'EGRESS_REFUSED' ? new UpstreamError('refused', shown, err.message) : new UpstreamError('connect', shown, describe(err))),
      );
      request.on('response', (res) => {
        if (settled) {
          res.destroy();
          return;
        }
        settled = true;
        clearTimeout(deadline);
        // Body idle deadline: the socket timer restarts on every byte.
        request.setTimeout(this.#idleTimeoutMs, () =>
          res.destroy(new UpstreamError('timeout', shown, `body idle for more than ${this.#idleTimeoutMs} ms`)),
        );
        if (req.signal) {
          req.signal.removeEventListener('abort', onAbort);
          const abortBody = (): void => {
            res.destroy(new UpstreamError('aborted', shown, 'request aborted'));
          };
          req.signal.addEventListener('abort', abortBody, { once: true });
          res.once('close', () => req.signal?.removeEventListener('abort', abortBody));
        }
        resolve(res);
      });
      request.end();
    });
  }
}

/** A network error's code, never its full message (which may quote a host or path). */
function describe(err: NodeJS.ErrnoException): string {
  return err.code ? `connection failed (${err.code})` : 'connection failed';
}

/** A body dropped unread is drained (the connection stays reusable) up to this; past it the connection is cut. */
const DISCARD_DRAIN_BYTES = 64 * 1024;

/**
 * Drops a body the caller does not want, so the connection and slot are freed: a short one is
 * drained so its connection can be reused, a long (or endless) one is cut.
 */
export function discard(res: UpstreamResponse): void {
  let drained = 0;
  res.body.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > DISCARD_DRAIN_BYTES) res.body.destroy();
  });
  res.body.on('error', () => {});
  res.body.resume();
}

/** One header value as a string (the first, when repeated). */
export function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Reads a whole upstream body into memory, never more than `limit` bytes: an announced length over
 * it fails before a byte is read, and a body without one (chunked, or simply endless) fails as
 * soon as it passes the limit, either as an `UpstreamError` of kind `too_large`. A body that breaks
 * off is kind `broken` (or the kind the client destroyed it with: an idle `timeout`, `aborted`).
 * Every upstream answer read into memory goes through here.
 */
export async function readBounded(res: UpstreamResponse, limit: number): Promise<Buffer> {
  const tooLarge = () => new UpstreamError('too_large', null, `upstream ${res.url} sent a document larger than ${limit} bytes`, { shownUrl: res.url });
  const declared = Number(header(res.headers, 'content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    res.body.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) {
        res.body.destroy();
        throw tooLarge();
      }
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof UpstreamError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    // A socket error's message may quote a host or a path: only its code is shown.
    throw new UpstreamError('broken', null, `upstream ${res.url}: the body broke off${code ? ` (${code})` : ''}`, { shownUrl: res.url });
  }
  return Buffer.concat(chunks, size);
}
