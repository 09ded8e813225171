/**
 * Blobs a cached OCI index does not hold yet. A whole GET joins the index's single flight for the
 * digest (roles/single-flight.ts): one upstream fetch however many clients ask, streamed to every
 * one of them while it is hashed and staged, published (and held by this index) only when the
 * digest verifies; a mismatch or a broken upstream body breaks every client's transfer and stores
 * nothing. A HEAD or a Range request on a miss is passed to the upstream and answered from its
 * reply without storing anything: a part of a blob is never stored. With several worker
 * processes, the flight is theirs together: one fetch for the whole server. Identical concurrent
 * HEADs (a client's, or the adoption check below) share one upstream HEAD too.
 *
 * With several upstreams, each exchange asks them in order and any of them may supply a blob (its
 * digest pins it): one that cannot answer now, or says 404, passes to the next
 * (roles/upstream-list.ts). A transfer that breaks off mid-body is not resumed elsewhere: the
 * flight fails, and the client's retry starts a new one.
 *
 * Nothing here writes a reply: a pull says what there is to send (`BlobPull`), and the blob
 * handler (handlers/blobs.ts) sends it.
 */
import type { Readable } from 'node:stream';
import type { IndexCounters } from '../../../observe/counters.js';
import type { FlightPeers } from '../../../roles/flight-peers.js';
import { PromiseFlights } from '../../../roles/promise-flights.js';
import { BlobFlights, type FlightOutcome } from '../../../roles/single-flight.js';
import { discard, header } from '../../../roles/upstream.js';
import { restated, UpstreamError } from '../../../roles/upstream-error.js';
import type { Holder } from '../../../storage/holds.js';
import type { BlobStore } from '../../../storage/types.js';
import { OciError, OciStatusError } from '../../model/errors.js';
import type { CachedUpstream } from './upstream.js';

/** What a pull-through of a blob found, and what there is to send for it. */
export type BlobPull =
  /** The upstream does not have it. */
  | { kind: 'unknown' }
  /** The index holds it now (its bytes were stored already, or arrived meanwhile): serve it from the store. */
  | { kind: 'stored' }
  /** A whole GET through the single flight: the bytes as they arrive, `size` when the upstream announced it. */
  | { kind: 'fetched'; body: Readable; size?: number }
  /**
   * A HEAD, or a GET of a range, passed to the upstream and not stored: its status (200 or 206),
   * its `Content-Length` and `Content-Range` as it sent them, and for a GET its bytes.
   */
  | { kind: 'passed'; status: number; body: Readable | null; contentLength?: string; contentRange?: string };

/** What the client asked for: a HEAD, or a GET of the whole blob or of a `Range`. */
export interface BlobWant {
  head: boolean;
  range?: string;
  /**
   * The caller has just found no bytes of the blob in the store: the adoption check does not
   * look again. (Bytes stored meanwhile are found by the flight's own recheck.)
   */
  notStored?: boolean;
  /** With `notStored`: when (`Date.now()`) that lookup began (`OpenOptions.since`). */
  lookedAt?: number;
}

/** What an upstream HEAD of a blob said: 404 as null. */
interface BlobHead {
  status: number;
  contentLength?: string;
}

export class CachedBlobs {
  readonly #flights: BlobFlights;
  /** Concurrent HEADs of one blob of one repository share one walk over the upstreams. */
  readonly #heads = new PromiseFlights<BlobHead | null>();

  constructor(
    private readonly upstream: CachedUpstream,
    private readonly store: BlobStore,
    private readonly holder: Holder,
    /** The cached index's own counters: the flights' outcomes and their upstream errors. */
    private readonly counters: IndexCounters,
    /** The server's other worker processes, which share each blob's fetch with this one. */
    peers?: { flights: FlightPeers; scope: string },
  ) {
    this.#flights = new BlobFlights({
      store,
      holder,
      counters,
      onOutcome: (outcome) => this.#counted(outcome),
      ...(peers ? { peers } : {}),
    });
  }

  /** `hex` of `repo` from the upstream, as `want` asks for it (see the module comment). */
  async pull(repo: readonly string[], hex: string, want: BlobWant): Promise<BlobPull> {
    const adopted = want.notStored ? 'absent' : await this.#adopt(repo, hex);
    if (adopted !== 'absent') return { kind: adopted };
    if (want.head || want.range !== undefined) return this.#passThrough(repo, hex, want);
    const delivery = await this.#open(repo, hex, want.notStored ? want.lookedAt : undefined);
    if (delivery === 'unknown') return { kind: 'unknown' };
    if (!delivery) return { kind: 'stored' };
    return { kind: 'fetched', body: delivery.stream, ...(delivery.size !== undefined ? { size: delivery.size } : {}) };
  }

  /** Makes sure this index holds `hex` (fetching it once if not): for the layer browser. */
  async ensure(repo: readonly string[], hex: string): Promise<'held' | 'unknown'> {
    const adopted = await this.#adopt(repo, hex);
    if (adopted !== 'absent') return adopted === 'stored' ? 'held' : 'unknown';
    const delivery = await this.#open(repo, hex);
    if (delivery === 'unknown') return 'unknown';
    if (!delivery) return 'held';
    delivery.stream.resume();
    const outcome = await delivery.outcome;
    if (outcome.kind === 'published' || outcome.kind === 'already_stored') return 'held';
    if (outcome.kind === 'rejected') throw new UpstreamError('mismatch', null, `the upstream's bytes for blob sha256:${hex} did not match the digest; nothing was stored`);
    // Not the upstream's failure: the store's own answer (a 503 while it does not answer).
    if (outcome.kind === 'store_error') throw outcome.error;
    throw new UpstreamError('broken', null, `the upstream registry ${this.upstream.displayUrl} failed while sending blob sha256:${hex}`);
  }

  /**
   * Bytes the store already has (another index or ecosystem holds them) are this index's too once
   * the upstream confirms it has the digest: one HEAD instead of a download. The bytes are
   * content-addressed and were verified when stored.
   */
  async #adopt(repo: readonly string[], hex: string): Promise<'stored' | 'unknown' | 'absent'> {
    if ((await this.store.stat(hex)) === null) return 'absent';
    const known = await this.upstream.orUnavailable(() => this.#head(repo, hex), repo);
    if (known === null) return 'unknown';
    // Held, then looked at again: a collection may have deleted the unheld bytes since the stat
    // above (lifecycle/collect.ts); then they are fetched like any missing blob.
    const gone = await this.holder.touchStored([hex]);
    return gone.length > 0 ? 'absent' : 'stored';
  }

  /**
   * The flight of `hex`: a delivery, null when the bytes turned out stored, or `unknown`. A failed
   * upstream is the client's 502 here, but counted once per flight (`#counted`), not per client.
   */
  async #open(repo: readonly string[], hex: string, since?: number) {
    const opened = async () => {
      try {
        return await this.#flights.open<null>(
          hex,
          async () => {
            const res = await this.upstream.ask(
              repo,
              async (registry) => {
                const res = await registry.fetch({ repository: registry.upstreamName(repo), path: `blobs/sha256:${hex}` });
                if (res.status === 200) return res;
                discard(res);
                if (res.status === 404) return null;
                throw new UpstreamError('status', null, `answered ${res.status} to the blob GET`, { status: res.status });
              },
              { absent: (r) => r === null, pinned: true },
            );
            if (res === null) throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored, nor known upstream`);
            const length = header(res.headers, 'content-length');
            return { body: res.body, expected: hex, ...(length !== undefined ? { size: Number(length) } : {}), meta: null };
          },
          { recheck: async () => (await this.store.stat(hex)) !== null && (await this.holder.isHeld(hex)), ...(since !== undefined ? { since } : {}) },
        );
      } catch (err) {
        if (err instanceof OciError && err.code === 'BLOB_UNKNOWN') return 'unknown' as const;
        throw err;
      }
    };
    return this.upstream.orElse(opened, (failure) => {
      throw restated(failure, `the upstream registry ${this.upstream.displayUrl} failed and the blob is not cached: ${failure.message}`);
    });
  }

  /** A HEAD or a range: the upstream's answer, passed on and not stored. */
  async #passThrough(repo: readonly string[], hex: string, want: BlobWant): Promise<BlobPull> {
    const { head, range } = want;
    if (head) {
      const found = await this.upstream.orUnavailable(() => this.#head(repo, hex), repo);
      if (found === null) return { kind: 'unknown' };
      return { kind: 'passed', status: found.status, body: null, ...(found.contentLength !== undefined ? { contentLength: found.contentLength } : {}) };
    }
    const res = await this.upstream.orUnavailable(
      () =>
        this.upstream.ask(
          repo,
          async (registry) => {
            const res = await registry.fetch({ repository: registry.upstreamName(repo), path: `blobs/sha256:${hex}`, ...(range !== undefined ? { headers: { range } } : {}) });
            if ([200, 206, 404, 416].includes(res.status)) return res;
            discard(res);
            throw new UpstreamError('status', null, `answered ${res.status} to the blob GET`, { status: res.status });
          },
          { absent: (r) => r.status === 404, pinned: true },
        ),
      repo,
    );
    if (res.status === 404) {
      discard(res);
      return { kind: 'unknown' };
    }
    if (res.status === 416) {
      discard(res);
      const cr = header(res.headers, 'content-range');
      throw new OciStatusError(416, 'RANGE_NOT_SATISFIABLE', `range "${range ?? ''}" cannot be served`, cr !== undefined ? { 'Content-Range': cr } : {});
    }
    const contentLength = header(res.headers, 'content-length');
    const contentRange = header(res.headers, 'content-range');
    return {
      kind: 'passed',
      status: res.status,
      body: res.body,
      ...(contentLength !== undefined ? { contentLength } : {}),
      ...(contentRange !== undefined ? { contentRange } : {}),
    };
  }

  /**
   * One HEAD of the blob, asked of the upstreams in order (any may have it: the digest pins it);
   * null when none has it. Concurrent HEADs of the same blob and repository share it.
   */
  #head(repo: readonly string[], hex: string): Promise<BlobHead | null> {
    return this.#heads.run(`${repo.join('/')}@${hex}`, () =>
      this.upstream.ask(
        repo,
        async (registry) => {
          const res = await registry.fetch({ method: 'HEAD', repository: registry.upstreamName(repo), path: `blobs/sha256:${hex}` });
          discard(res);
          if (res.status === 404) return null;
          if (res.status !== 200) throw new UpstreamError('status', null, `answered ${res.status} to the blob HEAD`, { status: res.status });
          const contentLength = header(res.headers, 'content-length');
          return { status: 200, ...(contentLength !== undefined ? { contentLength } : {}) };
        },
        { absent: (h) => h === null, pinned: true },
      ),
    );
  }

  #counted(outcome: FlightOutcome): void {
    if (outcome.kind === 'not_started' && outcome.error instanceof UpstreamError) this.counters.add('upstream_errors');
  }
}
