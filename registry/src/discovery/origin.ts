/**
 * The origin (`scheme://host[:port]`) a client reached the server at, from `Host`, or from
 * `X-Forwarded-Host` / `X-Forwarded-Proto` set by a trusted proxy in front (`trusted_proxies`;
 * from any other peer they are ignored: `ClientAddress.fromTrustedProxy` decides). These headers
 * are bytes someone sent: a value that is not a plausible host[:port], or a scheme other than
 * http and https, is ignored, never reflected. Only the normalised form of an accepted value is used.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { isIPv4, isIPv6 } from 'node:net';
import type { ExternalOrigin } from '../config/types.js';

export type Scheme = 'http' | 'https';

export interface Origin {
  scheme: Scheme;
  /** Lowercase host, with `:port` unless it is the scheme's default; IPv6 in brackets. */
  host: string;
  /** `scheme://host`, no trailing slash. */
  href: string;
}

const HOST_PORT = /^(?:\[([0-9A-Fa-f:.]{2,45})\]|([A-Za-z0-9._-]{1,253}))(?::([0-9]{1,5}))?$/;
/** A DNS label; `_` is allowed because container networks and /etc/hosts use such names. */
const LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

/** `host[:port]` in normalised form, or null when `raw` is not a plausible host. */
export function parseHost(raw: string): string | null {
  const m = HOST_PORT.exec(raw.trim());
  if (!m) return null;
  const [, v6, name, port] = m;
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return null;
  let host: string;
  if (v6 !== undefined) {
    if (!isIPv6(v6)) return null;
    host = `[${v6.toLowerCase()}]`;
  } else {
    const lower = (name ?? '').toLowerCase().replace(/\.$/, '');
    const labels = lower.split('.');
    if (!labels.every((l) => LABEL.test(l))) return null;
    // A name ending in a number is an IPv4 address or nothing ("1.2.3" would be read as 1.2.0.3).
    if (/^[0-9]+$/.test(labels[labels.length - 1] ?? '') && !isIPv4(lower)) return null;
    host = lower;
  }
  // The URL parser's spelling (compressed IPv6, for one), so what we print is what clients read.
  // It refuses what the label rule lets through but IDNA does not (`xn--0.a`): not a host either.
  let canonical: string;
  try {
    canonical = new URL(`http://${host}`).hostname;
  } catch {
    return null;
  }
  return port === undefined ? canonical : `${canonical}:${Number(port)}`;
}

export function parseScheme(raw: string): Scheme | null {
  const s = raw.trim().toLowerCase();
  return s === 'http' || s === 'https' ? s : null;
}

/** The first value of a header a proxy chain may have repeated or comma-joined (the client-facing one). */
function firstValue(value: string | string[] | undefined): string | undefined {
  const one = Array.isArray(value) ? value[0] : value;
  return one?.split(',')[0];
}

/**
 * The origin of a request: from a trusted proxy (`fromTrustedProxy`), `X-Forwarded-Host` when
 * valid, else `Host`, and `X-Forwarded-Proto` when valid, else the connection's own scheme; from
 * any other peer, `Host` and the connection's scheme alone. Either way a host named in `external`
 * (`external_urls`) without a forwarded scheme gets that URL's scheme. Null when no valid host was given.
 */
export function originOf(headers: IncomingHttpHeaders, connectionScheme: Scheme, fromTrustedProxy = false, external: readonly ExternalOrigin[] = []): Origin | null {
  const forwardedHost = fromTrustedProxy ? firstValue(headers['x-forwarded-host']) : undefined;
  const host = (forwardedHost === undefined ? null : parseHost(forwardedHost)) ?? parseHost(firstValue(headers.host) ?? '');
  if (host === null) return null;
  const forwardedProto = fromTrustedProxy ? firstValue(headers['x-forwarded-proto']) : undefined;
  // A host the registry is reached at from outside has that address's scheme (TLS ended in front).
  const declared = external.find((e) => e.host === new URL(`${e.scheme}://${host}`).host)?.scheme;
  const scheme = (forwardedProto === undefined ? null : parseScheme(forwardedProto)) ?? declared ?? connectionScheme;
  // The URL parser drops a default port (`:443` on https), so equal origins print equally.
  const url = new URL(`${scheme}://${host}`);
  return { scheme, host: url.host, href: url.origin };
}

/**
 * The address a connection came in on, as an origin: for a request that names no usable host
 * (HTTP/1.0 without `Host`) where an absolute URL is still needed.
 */
export function localOrigin(socket: { localAddress?: string | undefined; localPort?: number | undefined; encrypted?: boolean }): Origin {
  // A zone id (`fe80::1%eth0`) has no place in a URL.
  const address = (socket.localAddress ?? '127.0.0.1').replace(/%.*$/, '');
  const host = address.includes(':') ? `[${address}]` : address;
  // A TLS socket says so (`[tls]`): the origin is then https.
  const scheme: Scheme = socket.encrypted === true ? 'https' : 'http';
  const url = new URL(`${scheme}://${parseHost(host) ?? '127.0.0.1'}:${socket.localPort ?? 80}`);
  return { scheme, host: url.host, href: url.origin };
}

/** The headers the document depends on, for `Vary`. */
export const ORIGIN_HEADERS = 'Host, X-Forwarded-Host, X-Forwarded-Proto';

/** Whether clients treat `host` as loopback (pip and docker allow plain HTTP there without being told). */
export function isLoopback(origin: Origin): boolean {
  const name = origin.host.replace(/:[0-9]+$/, '');
  return name === 'localhost' || name === '[::1]' || /^127\.[0-9.]+$/.test(name);
}
