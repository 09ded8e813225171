/**
 * The bytes of a cached index's files, their PEP 658 metadata siblings and detached signatures.
 *
 * - An artifact is served from the store when present; otherwise one upstream fetch per file
 *   (single-flight) streams to every waiting client while it is hashed and staged, and the
 *   file is stored only when its sha256 matches the upstream page (else `rejected`).
 * - A metadata sibling is the upstream's own `.metadata` file (verified against the hash the page
 *   advertised), or, when the upstream has none, the wheel's `.dist-info/METADATA`: read by HTTP
 *   ranges from the upstream when the wheel is not stored and the upstream serves ranges (the
 *   wheel is not downloaded), else read from the stored wheel (fetched through the same
 *   single-flight first, so it gets stored too). A sibling whose hash the page did not give is
 *   remembered per file in the MetaStore.
 * - A file the page gives no size for has it recorded once known (`known-sizes.ts`); with a
 *   `maxSize` from the route's policy, a fetch whose announced length is over it is refused.
 *
 * Every blob stored here is held by `holder` first (the flights hold what they publish). A blob
 * found already stored is served without a hold of its own: should another ecosystem delete it,
 * the next request simply fetches it from the upstream again.
 *
 * Failures are typed, never a status: `UpstreamError` by kind (`gone` when the upstream has no
 * such file, `status`, `too_large`, `mismatch`, `malformed`, `broken`), `CachedBytesLostError`
 * for bytes that vanished between two reads; Python's table (handlers/answers.ts) answers them.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { ArchiveError, blobSource } from '../../../archive/index.js';
import { SlotsBusyError } from '../../../limits/slots.js';
import type { CounterSink } from '../../../observe/counters.js';
import { CachedBytesLostError } from '../../../roles/errors.js';
import { PromiseFlights } from '../../../roles/promise-flights.js';
import type { BlobFlights } from '../../../roles/single-flight.js';
import { discard, header, readBounded, type UpstreamClient, type UpstreamResponse } from '../../../roles/upstream.js';
import { restated, UpstreamError } from '../../../roles/upstream-error.js';
import type { UpstreamList, UpstreamMember } from '../../../roles/upstream-list.js';
import type { Holder } from '../../../storage/holds.js';
import type { BlobStore, MetaStore } from '../../../storage/types.js';
import type { ResolvedFile } from '../../model/resolved.js';
import { UpstreamFileTooLargeError, type FileBody, type FilePart, type OpenOptions } from '../source/types.js';
import type { KnownSizes } from './known-sizes.js';
import { metadataByRanges } from './ranged-metadata.js';
import type { UpstreamFile } from './upstream-page.js';
import { MAX_METADATA_BYTES, readWheelMetadata } from './wheel-metadata.js';

export { MAX_METADATA_BYTES };

/** A detached OpenPGP signature is a few hundred bytes; this leaves room for many. */
const MAX_SIGNATURE_BYTES = 64 * 1024;

export interface CachedFilesOptions {
  indexName: string;
  /** The index's upstreams: a file is fetched from the one whose page listed it, else from the others. */
  upstreams: UpstreamList<UpstreamClient>;
  /** Where another upstream keeps the same file (its page, by filename and sha256); throws `gone` when it does not. */
  elsewhere: (member: UpstreamMember<UpstreamClient>, project: string, filename: string, sha256: string) => Promise<string>;
  blobs: BlobStore;
  meta: MetaStore;
  /** Holds the metadata siblings stored here (the flights hold the files). */
  holder: Holder;
  flights: BlobFlights;
  counters: CounterSink;
  /** Scratch space for archive reads. */
  tmpDir: string;
  /** Where sizes the upstream page did not give are recorded once known. */
  sizes: KnownSizes;
  /** Told (not awaited) when a file or metadata sibling of `project` (normalized) was stored. */
  onStored?: (project: string) => void;
}

/** A listed file: the upstream's entry, our resolved one, its project, and the upstream whose page listed it. */
export interface ListedUpstreamFile {
  up: UpstreamFile;
  file: ResolvedFile;
  /** Normalized project name (where a learnt size is recorded). */
  project: string;
  from: UpstreamMember<UpstreamClient>;
}

/** Which listed file, for whom. */
interface Wanted extends ListedUpstreamFile {
  maxSize: number | undefined;
}

interface MetadataLink {
  sha256: string;
}

export class CachedFiles {
  readonly #o: CachedFilesOptions;
  readonly #metadataFlights = new PromiseFlights<string | null>();
  /** False once the upstream answered a range probe with something other than a 206. */
  #ranges = true;

  constructor(opts: CachedFilesOptions) {
    this.#o = opts;
  }

  async open(listed: ListedUpstreamFile, part: FilePart, opts: OpenOptions = {}): Promise<FileBody | null> {
    const wanted: Wanted = { ...listed, maxSize: opts.maxSize };
    if (part === 'signature') return this.#signature(wanted);
    return part === 'file' ? this.#artifact(wanted) : this.#metadata(wanted);
  }

  async #artifact(w: Wanted): Promise<FileBody> {
    const { file } = w;
    const lookedAt = Date.now();
    const stored = await this.#o.blobs.stat(file.sha256);
    if (stored) {
      await this.#learnSize(w, stored.size);
      return { kind: 'blob', digest: file.sha256, size: stored.size };
    }
    const delivery = await this.#fly(w, lookedAt);
    if (delivery) {
      const stored = delivery.outcome.then((o) => o.kind === 'published' || o.kind === 'already_stored');
      return { kind: 'stream', digest: file.sha256, stream: delivery.stream, size: delivery.size, stored };
    }
    // Another flight stored it meanwhile.
    const info = await this.#o.blobs.stat(file.sha256);
    if (!info) throw new CachedBytesLostError(`${file.filename} was stored and is gone again; retry`);
    return { kind: 'blob', digest: file.sha256, size: info.size };
  }

  /** `since`: when the caller's lookup that found the file not stored began (`OpenOptions.since`). */
  async #fly(w: Wanted, since?: number) {
    const delivery = await this.#o.flights.open(`python-file:${w.file.sha256}`, () => this.#start(w), {
      recheck: async () => (await this.#o.blobs.stat(w.file.sha256)) !== null,
      ...(since !== undefined ? { since } : {}),
    });
    // Once stored, the page gives the file's size (every waiter reports it; the first write wins).
    void delivery?.outcome.then((o) => {
      if (o.kind !== 'published') return undefined;
      this.#o.onStored?.(w.project);
      return this.#learnSize(w, o.info.size);
    });
    return delivery;
  }

  /**
   * The file's GET: from the upstream whose page listed it, else (it cannot answer now, or has it
   * no more) from the others, in order, where their pages list the same filename and sha256.
   */
  async #start(w: Wanted) {
    const { file } = w;
    let res: UpstreamResponse;
    try {
      const asked = await this.#o.upstreams.ask(
        async (m) => {
          const url = m === w.from ? w.up.url : await this.#o.elsewhere(m, w.project, file.filename, file.sha256);
          const res = await m.client.get(url);
          if (res.status === 200) return res;
          discard(res);
          const gone = res.status === 404 || res.status === 410;
          throw new UpstreamError(gone ? 'gone' : 'status', null, `the upstream ${m.url} answered ${res.status} for ${file.filename}`, { status: res.status });
        },
        { pinned: true, first: w.from },
      );
      res = asked.value;
    } catch (err) {
      throw this.#failure(err, file.filename);
    }
    const length = Number(header(res.headers, 'content-length'));
    const size = Number.isSafeInteger(length) && length >= 0 ? length : undefined;
    if (size !== undefined && w.maxSize !== undefined && size > w.maxSize) {
      // Refused before the body is read: nothing is downloaded or stored. The announced length
      // stands for the size (a stored file must have it, or its fetch fails), so pages drop it.
      res.body.destroy();
      await this.#learnSize(w, size);
      throw new UpstreamFileTooLargeError(file.filename, size);
    }
    return { body: res.body, expected: file.sha256, size, meta: null };
  }

  /** Records the size of a file whose page gave none; a failure to record costs only that. */
  async #learnSize(w: Wanted, size: number): Promise<void> {
    if (w.file.size !== null) return;
    try {
      await this.#o.sizes.learn(w.project, w.file.sha256, size);
    } catch {
      // The next request learns it again.
    }
  }

  /**
   * A sibling (`.metadata`, `.asc`) the page gives no hash for: a link or redirect to a host the
   * index does not fetch from counts as no sibling at all (the metadata is then read from the
   * verified wheel), never as a reason to fetch it.
   */
  async #getSibling(from: UpstreamMember<UpstreamClient>, url: string, filename: string): Promise<UpstreamResponse | null> {
    try {
      return await from.client.get(url);
    } catch (err) {
      if (err instanceof UpstreamError && err.kind === 'refused') return null;
      throw this.#failure(err, filename);
    }
  }

  #failure(err: unknown, filename: string): unknown {
    // Our own concurrency cap (429) and what is not the upstream's (a file over the size policy) pass through as they are.
    if (err instanceof SlotsBusyError || err instanceof UpstreamFileTooLargeError) return err;
    this.#o.counters.add('upstream_errors');
    // Only an UpstreamError's message is fit to show (a socket error's may quote a host or path).
    const why = err instanceof UpstreamError ? err.message : 'upstream request failed';
    return restated(err, `could not fetch ${filename} from the upstream: ${why}`);
  }

  // ---- detached signatures

  /**
   * The upstream's `.asc` for a file whose page says `gpg-sig: true`. The page gives no hash for
   * it, so it is stored as fetched the first time (its digest remembered, as for an unhashed
   * metadata sibling) and served from the store afterwards. It needs no hash: it is checked by
   * the client against the file, whose sha256 velodex did verify.
   */
  async #signature(w: Wanted): Promise<FileBody | null> {
    const { file } = w;
    if (file.gpgSig !== true) return null;
    const key = this.#linkKey(file, 'signature');
    let digest = (await this.#o.meta.get<MetadataLink>(key))?.doc.sha256 ?? null;
    let info = digest ? await this.#o.blobs.stat(digest) : null;
    if (!info) {
      digest = await this.#metadataFlights.run(`asc:${file.sha256}`, async () => {
        const bytes = await this.#fetchSibling(w, '.asc', MAX_SIGNATURE_BYTES);
        return bytes ? this.#storeSibling(bytes, key) : null;
      });
      info = digest ? await this.#o.blobs.stat(digest) : null;
    }
    return info ? { kind: 'blob', digest: info.digest, size: info.size } : null;
  }

  // ---- metadata siblings

  /**
   * The core metadata of `file` from the store alone, never the upstream: its stored `.metadata`
   * sibling, else the METADATA of the stored wheel; null when velodex holds neither.
   */
  async storedMetadata(file: ResolvedFile): Promise<Buffer | null> {
    const digest = file.metadataSha256 ?? (await this.#o.meta.get<MetadataLink>(this.#linkKey(file)))?.doc.sha256 ?? null;
    const sibling = digest ? await this.#o.blobs.get(digest) : null;
    if (sibling) return buffer(sibling);
    if (file.kind !== 'wheel') return null;
    const source = await blobSource(this.#o.blobs, file.sha256);
    return source ? readWheelMetadata(source, file.filename, this.#o.tmpDir) : null;
  }

  #linkKey(file: ResolvedFile, sibling: 'metadata' | 'signature' = 'metadata'): string {
    return `python/${this.#o.indexName}/cache/${sibling}/${file.sha256}`;
  }

  async #metadata(w: Wanted): Promise<FileBody | null> {
    const { file } = w;
    if (file.metadataSha256 === null && !file.metadataUnhashed) return null;
    let digest = file.metadataSha256 ?? (await this.#o.meta.get<MetadataLink>(this.#linkKey(file)))?.doc.sha256 ?? null;
    let info = digest ? await this.#o.blobs.stat(digest) : null;
    if (!info) {
      digest = await this.#metadataFlights.run(file.sha256, () => this.#obtainMetadata(w));
      info = digest ? await this.#o.blobs.stat(digest) : null;
      if (info) this.#o.onStored?.(w.project);
    }
    return info ? { kind: 'blob', digest: info.digest, size: info.size } : null;
  }

  async #obtainMetadata(w: Wanted): Promise<string | null> {
    const { up, file } = w;
    if (up.metadata !== false) {
      const sibling = await this.#fetchSibling(w, '.metadata', MAX_METADATA_BYTES);
      if (sibling) return this.#storeMetadata(sibling, file);
    }
    if (file.kind !== 'wheel') return null;
    if (this.#ranges && !(await this.#o.blobs.stat(file.sha256))) {
      const ranged = await metadataByRanges({ client: w.from.client, url: up.url, file, tmpDir: this.#o.tmpDir });
      if (ranged.kind === 'ok') return this.#storeMetadata(ranged.bytes, file);
      if (ranged.kind === 'no-ranges') this.#ranges = false;
    }
    return this.#storeMetadata(await this.#fromWheel(w), file);
  }

  /** The upstream's `{file}{suffix}` sibling, or null when it has none. */
  async #fetchSibling(w: Wanted, suffix: string, maxBytes: number): Promise<Buffer | null> {
    const { up, file } = w;
    const url = new URL(up.url);
    url.pathname += suffix;
    const res = await this.#getSibling(w.from, url.toString(), `${file.filename}${suffix}`);
    if (res === null) return null;
    if (res.status === 404 || res.status === 410) {
      discard(res);
      return null;
    }
    if (res.status !== 200) {
      discard(res);
      this.#o.counters.add('upstream_errors');
      throw new UpstreamError('status', null, `the upstream answered ${res.status} for ${file.filename}${suffix}`, { status: res.status });
    }
    try {
      return await readBounded(res, maxBytes);
    } catch (err) {
      if (err instanceof UpstreamError && err.kind === 'too_large') {
        throw new UpstreamError('too_large', null, `the upstream's ${file.filename}${suffix} is larger than ${maxBytes} bytes`);
      }
      throw err;
    }
  }

  async #storeMetadata(bytes: Buffer, file: ResolvedFile): Promise<string> {
    const expected = file.metadataSha256 ?? undefined;
    const digest = createHash('sha256').update(bytes).digest('hex');
    if (expected !== undefined && digest !== expected) {
      this.#o.counters.add('rejected');
      throw new UpstreamError('mismatch', null, `the core metadata of ${file.filename} does not match the hash the upstream page gives; not cached`);
    }
    return expected === undefined ? this.#storeSibling(bytes, this.#linkKey(file)) : this.#storeBytes(bytes, digest);
  }

  /** Stores a sibling the page gives no hash for, and remembers its digest under `linkKey`. */
  async #storeSibling(bytes: Buffer, linkKey: string): Promise<string> {
    const digest = await this.#storeBytes(bytes, createHash('sha256').update(bytes).digest('hex'));
    await this.#o.meta.put<MetadataLink>(linkKey, { sha256: digest });
    return digest;
  }

  /** Hashed by the caller, not the store: the hold must be taken before the bytes are stored. */
  async #storeBytes(bytes: Buffer, digest: string): Promise<string> {
    await this.#o.holder.hold(digest, bytes.length);
    return (await this.#o.blobs.put(Readable.from([bytes]), digest)).digest;
  }

  /** The wheel's METADATA, from the store (fetching the wheel into it first when needed). */
  async #fromWheel(w: Wanted): Promise<Buffer> {
    const { file } = w;
    if (!(await this.#o.blobs.stat(file.sha256))) {
      const delivery = await this.#fly(w);
      if (delivery) {
        delivery.stream.on('error', () => undefined);
        delivery.stream.resume();
        const outcome = await delivery.outcome;
        if (outcome.kind === 'rejected') throw new UpstreamError('mismatch', null, `${file.filename} from the upstream does not match its sha256; not cached`);
        if (outcome.kind !== 'published' && outcome.kind !== 'already_stored') {
          throw new UpstreamError('broken', null, `could not fetch ${file.filename} from the upstream to read its metadata`);
        }
      }
    }
    const source = await blobSource(this.#o.blobs, file.sha256);
    if (!source) throw new CachedBytesLostError(`${file.filename} is not stored; retry`);
    try {
      return await readWheelMetadata(source, file.filename, this.#o.tmpDir);
    } catch (err) {
      if (err instanceof ArchiveError) throw new UpstreamError('malformed', null, `cannot read the METADATA of ${file.filename}: ${err.message}`);
      throw err;
    }
  }
}
