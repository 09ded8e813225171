/**
 * Blobs a cached OCI index does not hold yet. A whole GET joins the index's single flight for the
 * digest (roles/single-flight.ts): one upstream fetch however many clients ask, streamed to every
 * one of them while it is hashed and staged, published (and held by this index) only when the
 * digest verifies; a mismatch or a broken upstream body breaks every client's transfer and stores
 * nothing. A HEAD or a Range request on a miss is passed to the upstream and answered from its
 * reply without storing anything: a part of a blob is never stored. With several worker
 * processes, the flight is theirs together: one fetch for the whole server.
 */
import { OCTET_STREAM } from '../../handlers/blobs.js';
import type { OciCall } from '../../handlers/exchange.js';
import { OciError, OciStatusError } from '../../model/errors.js';
import type { FlightPeers } from '../../../roles/flight-peers.js';
import { BlobFlights, type FlightOutcome } from '../../../roles/single-flight.js';
import { discard, header } from '../../../roles/upstream.js';
import type { Holder } from '../../../storage/holds.js';
import type { BlobStore } from '../../../storage/types.js';
import type { CachedRepos } from './repos.js';
import { UpstreamFailure, upstreamFailureOf } from './upstream-failure.js';

/** What a pull-through did: answered the client, found the blob stored meanwhile, or learned the upstream lacks it. */
export type PullThrough = 'served' | 'stored' | 'unknown';

export class CachedBlobs {
  readonly #flights: BlobFlights;

  constructor(
    private readonly repos: CachedRepos,
    private readonly store: BlobStore,
    private readonly holder: Holder,
    /** The server's other worker processes, which share each blob's fetch with this one. */
    peers?: { flights: FlightPeers; scope: string },
  ) {
    this.#flights = new BlobFlights({
      store,
      holder,
      counters: repos.counters,
      onOutcome: (outcome) => this.#counted(outcome),
      ...(peers ? { peers } : {}),
    });
  }

  /** Answers a GET or HEAD of `hex` in `repo` from the upstream (see the module comment). */
  async serve(call: OciCall, repo: readonly string[], hex: string, head: boolean): Promise<PullThrough> {
    const adopted = await this.#adopt(repo, hex);
    if (adopted !== 'absent') return adopted;
    const range = call.request.headers.range;
    if (head || typeof range === 'string') return this.#passThrough(call, repo, hex, head, typeof range === 'string' ? range : undefined);
    const delivery = await this.#open(repo, hex);
    if (delivery === 'unknown') return 'unknown';
    if (!delivery) return 'stored';
    const { reply } = call;
    reply.header('Docker-Content-Digest', `sha256:${hex}`).header('Accept-Ranges', 'bytes').type(OCTET_STREAM);
    if (delivery.size !== undefined) reply.header('Content-Length', String(delivery.size));
    const name = call.target.repo.join('/');
    const counters = call.deps.ctx.counters.index(call.target.index.route);
    counters.add('downloads', 1, name, `sha256:${hex}`);
    if (delivery.size !== undefined) counters.add('bytes', delivery.size, name, `sha256:${hex}`);
    await reply.send(delivery.stream);
    return 'served';
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
    if (outcome.kind === 'rejected') throw new OciError('UNKNOWN', `the upstream's bytes for blob sha256:${hex} did not match the digest; nothing was stored`);
    throw new OciError('UNKNOWN', `the upstream registry ${this.repos.upstream.displayUrl} failed while sending blob sha256:${hex}`);
  }

  /**
   * Bytes the store already has (another index or ecosystem holds them) are this index's too once
   * the upstream confirms it has the digest: one HEAD instead of a download. The bytes are
   * content-addressed and were verified when stored.
   */
  async #adopt(repo: readonly string[], hex: string): Promise<'stored' | 'unknown' | 'absent'> {
    if ((await this.store.stat(hex)) === null) return 'absent';
    const upstream = this.repos.upstream;
    let res;
    try {
      res = await upstream.fetch({ method: 'HEAD', repository: upstream.upstreamName(repo), path: `blobs/sha256:${hex}` });
    } catch (err) {
      throw this.#failed(err, repo);
    }
    discard(res);
    if (res.status === 404) return 'unknown';
    if (res.status !== 200) throw this.#failed(new UpstreamFailure(`answered ${res.status} to the blob HEAD`), repo);
    await this.holder.hold(hex);
    return 'stored';
  }

  async #open(repo: readonly string[], hex: string) {
    const upstream = this.repos.upstream;
    try {
      return await this.#flights.open<null>(
        hex,
        async () => {
          const res = await upstream.fetch({ repository: upstream.upstreamName(repo), path: `blobs/sha256:${hex}` });
          if (res.status === 404) {
            discard(res);
            throw new OciError('BLOB_UNKNOWN', `blob sha256:${hex} is not stored, nor known upstream`);
          }
          if (res.status !== 200) {
            discard(res);
            throw new UpstreamFailure(`answered ${res.status} to the blob GET`);
          }
          const length = header(res.headers, 'content-length');
          return { body: res.body, expected: hex, ...(length !== undefined ? { size: Number(length) } : {}), meta: null };
        },
        { recheck: async () => (await this.store.stat(hex)) !== null && (await this.holder.isHeld(hex)) },
      );
    } catch (err) {
      if (err instanceof OciError && err.code === 'BLOB_UNKNOWN') return 'unknown' as const;
      throw this.#answer(err);
    }
  }

  async #passThrough(call: OciCall, repo: readonly string[], hex: string, head: boolean, range: string | undefined): Promise<PullThrough> {
    const upstream = this.repos.upstream;
    let res;
    try {
      res = await upstream.fetch({
        method: head ? 'HEAD' : 'GET',
        repository: upstream.upstreamName(repo),
        path: `blobs/sha256:${hex}`,
        ...(range !== undefined && !head ? { headers: { range } } : {}),
      });
    } catch (err) {
      throw this.#failed(err, repo);
    }
    if (res.status === 404) {
      discard(res);
      return 'unknown';
    }
    if (res.status === 416) {
      discard(res);
      const cr = header(res.headers, 'content-range');
      throw new OciStatusError(416, 'RANGE_NOT_SATISFIABLE', `range "${range ?? ''}" cannot be served`, cr !== undefined ? { 'Content-Range': cr } : {});
    }
    if (res.status !== 200 && res.status !== 206) {
      discard(res);
      throw this.#failed(new UpstreamFailure(`answered ${res.status} to the blob ${head ? 'HEAD' : 'GET'}`), repo);
    }
    const { reply } = call;
    reply.code(res.status).header('Docker-Content-Digest', `sha256:${hex}`).header('Accept-Ranges', 'bytes').type(OCTET_STREAM);
    for (const name of ['content-length', 'content-range']) {
      const v = header(res.headers, name);
      if (v !== undefined) reply.header(name, v);
    }
    if (head) {
      discard(res);
      await reply.send();
    } else {
      await reply.send(res.body);
    }
    return 'served';
  }

  /** The client's answer to a failed fetch; an upstream failure is counted once per flight (`#counted`). */
  #answer(err: unknown): unknown {
    const failure = upstreamFailureOf(err);
    if (!failure) return err;
    this.repos.health.down(failure, Date.now());
    return new OciError('UNKNOWN', `the upstream registry ${this.repos.upstream.displayUrl} failed and the blob is not cached: ${failure.message}`);
  }

  /** A pass-through's failure, counted here (no flight counts it). */
  #failed(err: unknown, repo: readonly string[]): unknown {
    const failure = upstreamFailureOf(err);
    return failure ? this.repos.unavailable(failure, repo) : err;
  }

  #counted(outcome: FlightOutcome): void {
    if (outcome.kind === 'not_started' && upstreamFailureOf(outcome.error)) this.repos.counters.add('upstream_errors');
  }
}
