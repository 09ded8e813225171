/**
 * Which address a request comes from, for the rate limiter and the security log, and whether its
 * socket peer is a trusted proxy: the one place that decides whether a request's `X-Forwarded-*`
 * headers are believed (`X-Forwarded-For` here; `-Host` and `-Proto` for the origin,
 * `discovery/origin.ts`, which asks `fromTrustedProxy`).
 *
 * The socket's peer, unless that peer is a configured trusted proxy: then `X-Forwarded-For` is
 * read from the right (each proxy appends the address of the peer it saw), skipping trusted
 * hops, and the first address that is not trusted is the client. Everything left of it was
 * written by the client or by proxies nobody vouches for, so it is never believed. Entries that
 * are not addresses (`unknown`, junk) are skipped: only a trusted proxy can have written anything
 * right of the client's real address, and the client cannot move its own address out of the way.
 * With no trusted proxy configured the header is ignored outright.
 *
 * Networks are matched by `net.BlockList`, not by hand-written CIDR math.
 */
import { BlockList, isIP, SocketAddress } from 'node:net';
import type { AddressRange } from '../config/types.js';

/** What is read of a socket: its peer's address (undefined once it is closed). */
export interface PeerSocket {
  remoteAddress?: string | undefined;
}

export class ClientAddress {
  readonly #peers = new WeakMap<object, string>();
  readonly #trusted: BlockList;
  readonly #any: boolean;

  constructor(trusted: readonly AddressRange[]) {
    this.#trusted = new BlockList();
    for (const r of trusted) this.#trusted.addSubnet(r.address, r.prefix, r.family);
    this.#any = trusted.length > 0;
  }

  /** True when `address` (a plain IP) is one of the trusted proxies. */
  isTrusted(address: string): boolean {
    const version = isIP(address);
    if (version === 0) return false;
    try {
      return this.#trusted.check(address, version === 4 ? 'ipv4' : 'ipv6');
    } catch {
      // An address BlockList cannot read (an IPv6 zone id, say) is no proxy of ours.
      return false;
    }
  }

  /**
   * `of` for a request on `socket`: without a header to weigh, the answer is the socket's own
   * address, worked out once per connection (keep-alive clients send many requests on one).
   */
  ofConnection(socket: PeerSocket, forwardedFor: string | string[] | undefined): string {
    if (forwardedFor !== undefined && this.#any) return this.of(socket.remoteAddress, forwardedFor);
    return this.peerOf(socket);
  }

  /** The socket's own peer address (no header weighed), worked out once per connection. */
  peerOf(socket: PeerSocket): string {
    let peer = this.#peers.get(socket);
    if (peer === undefined) {
      peer = plainAddress(socket.remoteAddress ?? '') ?? 'unknown';
      this.#peers.set(socket, peer);
    }
    return peer;
  }

  /**
   * True when the connection's peer is a trusted proxy, so the forwarded headers of requests on
   * it are believed. Without trusted proxies, never.
   */
  fromTrustedProxy(socket: PeerSocket): boolean {
    return this.#any && this.isTrusted(this.peerOf(socket));
  }

  /** The client of a request whose socket peer is `socket` and whose header is `forwardedFor`. */
  of(socket: string | undefined, forwardedFor: string | string[] | undefined): string {
    const peer = plainAddress(socket ?? '') ?? 'unknown';
    if (!this.#any || forwardedFor === undefined || !this.isTrusted(peer)) return peer;
    const entries = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
    let furthest = peer;
    for (let i = entries.length - 1; i >= 0; i--) {
      const address = plainAddress(entries[i]!.trim());
      if (address === null) continue;
      if (!this.isTrusted(address)) return address;
      furthest = address;
    }
    // Every hop is trusted: the furthest one seen is the best name of the client.
    return furthest;
  }
}

const IPV4_WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/;
const BRACKETED_V6 = /^\[([0-9A-Fa-f:.]+)\](?::\d{1,5})?$/;
const MAPPED_V4 = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/**
 * The IP in a socket address or a forwarded entry, or null. Ports (`1.2.3.4:80`, `[::1]:80`, as
 * some proxies write them) are dropped, IPv6 is written one way (zone ids dropped), and an
 * IPv4-mapped IPv6 address (a dual-stack socket) becomes its IPv4 form, so one client has one key
 * however it connected.
 */
export function plainAddress(text: string): string | null {
  const raw = IPV4_WITH_PORT.exec(text)?.[1] ?? BRACKETED_V6.exec(text)?.[1] ?? text;
  const version = isIP(raw);
  if (version === 4) return raw;
  if (version === 0) return null;
  let canonical: string;
  try {
    // One spelling per IPv6 address (`2001:DB8:0::1` is `2001:db8::1`), so it has one key.
    canonical = new SocketAddress({ address: raw, family: 'ipv6' }).address;
  } catch {
    return null;
  }
  return MAPPED_V4.exec(canonical)?.[1] ?? canonical;
}
