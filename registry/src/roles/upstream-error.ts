/**
 * The one error of an upstream exchange that gave no usable answer, whoever met it: the upstream
 * client (no connection, a timeout, a redirect loop, egress refused), a document fetch (a status
 * that is neither the content nor "gone", a body over its bound), the bearer-token realm, a
 * range read, a cached role with nothing stored to fall back on, or an ecosystem's read layer
 * (a page that does not parse, bytes that do not match their digest). `kind` says which
 * (errors/neutral.ts); callers branch on it, and each ecosystem answers it in its table.
 *
 * Messages never carry a credential, a path or a query string: a URL appears only as
 * `displayUrl` shows it, and `url` holds that shown form too, since a logged error carries its
 * fields.
 */
import { displayUrl } from '../config/sanitize.js';
import { NeutralError, type UpstreamFailureKind } from '../errors/neutral.js';

export type { UpstreamFailureKind };

export interface UpstreamErrorOptions {
  /** The upstream's status, for `status` and `gone`. */
  status?: number;
  cause?: unknown;
  /** With no `url` argument: the URL the message already names, as `displayUrl` showed it. */
  shownUrl?: string;
}

export class UpstreamError extends NeutralError {
  /** The URL as `displayUrl` shows it, when one is known. */
  readonly url: string | undefined;
  readonly status: number | undefined;

  /**
   * With `url`, the message is `upstream <url as shown>: <detail>`; with null, `detail` is the
   * whole message and must already be fit to show.
   */
  constructor(
    readonly kind: UpstreamFailureKind,
    url: string | null,
    detail: string,
    options: UpstreamErrorOptions = {},
  ) {
    const shown = url === null ? options.shownUrl : displayUrl(url);
    super(url === null ? detail : `upstream ${shown}: ${detail}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'UpstreamError';
    this.url = shown;
    this.status = options.status;
  }
}

/**
 * `cause` restated under `message` (which says what it meant: nothing cached to serve, a file
 * that could not be fetched), keeping its kind; a cause that is no `UpstreamError` (a socket
 * reset mid-body, a plain error) is `broken`. The cause is not attached: a logged error appends
 * its cause's message, and a socket error's may quote a host or path.
 */
export function restated(cause: unknown, message: string): UpstreamError {
  const known = cause instanceof UpstreamError ? cause : undefined;
  return new UpstreamError(known?.kind ?? 'broken', null, message, {
    ...(known?.status !== undefined ? { status: known.status } : {}),
    ...(known?.url !== undefined ? { shownUrl: known.url } : {}),
  });
}
