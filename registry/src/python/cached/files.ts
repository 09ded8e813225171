/**
 * The bytes of a cached index's files and their PEP 658 metadata siblings.
 *
 * - An artifact is served from the store when present; otherwise one upstream fetch per file
 *   (single-flight) streams to every waiting client while it is hashed and spooled, and the
 *   file is stored only when its sha256 matches the upstream page (else `rejected`).
 * - A metadata sibling is the upstream's own `.metadata` file (verified against the hash the page
 *   advertised), or, when the upstream has none, the wheel's `.dist-info/METADATA`: read by HTTP
 *   ranges from the upstream when the wheel is not stored and the upstream serves ranges (the
 *   wheel is not downloaded), else read from the stored wheel (fetched through the same
 *   single-flight first, so it gets stored too). A sibling whose hash the page did not give is
 *   remembered per file in the MetaStore.
 *
 * Every blob stored here is held by `holder` first (the flights hold what they publish). A blob
 * found already stored is served without a hold of its own: should another ecosystem delete it,
 * the next request simply fetches it from the upstream again.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { ArchiveError, blobSource } from '../../archive/index.js';
import { HttpError } from '../../http/errors.js';
import { SlotsBusyError } from '../../limits/slots.js';
import type { CounterSink } from '../../observe/counters.js';
import { DocumentTooLargeError, readBounded } from '../../roles/fetch-doc.js';
import { PromiseFlights } from '../../roles/promise-flights.js';
import type { BlobFlights } from '../../roles/single-flight.js';
import { header, UpstreamError, type UpstreamClient } from '../../roles/upstream.js';
import type { Holder } from '../../storage/holds.js';
import type { BlobStore, MetaStore } from '../../storage/types.js';
import type { ResolvedFile } from '../simple/resolved.js';
import type { FileBody, FilePart } from '../sources/types.js';
import { metadataByRanges } from './ranged-metadata.js';
import type { UpstreamFile } from './upstream-page.js';
import { MAX_METADATA_BYTES, readWheelMetadata } from './wheel-metadata.js';

export { MAX_METADATA_BYTES };

export interface CachedFilesOptions {
  indexName: string;
  client: UpstreamClient;
  blobs: BlobStore;
  meta: MetaStore;
  /** Holds the metadata siblings stored here (the flights hold the files). */
  holder: Holder;
  flights: BlobFlights;
  counters: CounterSink;
  /** Scratch space for archive reads. */
  tmpDir: string;
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

  async open(up: UpstreamFile, file: ResolvedFile, part: FilePart): Promise<FileBody | null> {
    return part === 'file' ? this.#artifact(up, file) : this.#metadata(up, file);
  }

  async #artifact(up: UpstreamFile, file: ResolvedFile): Promise<FileBody> {
    const stored = await this.#o.blobs.stat(file.sha256);
    if (stored) return { kind: 'blob', digest: file.sha256, size: stored.size };
    const delivery = await this.#fly(up, file);
    if (delivery) {
      const stored = delivery.outcome.then((o) => o.kind === 'published' || o.kind === 'already_stored');
      return { kind: 'stream', digest: file.sha256, stream: delivery.stream, size: delivery.size, stored };
    }
    // Another flight stored it meanwhile.
    const info = await this.#o.blobs.stat(file.sha256);
    if (!info) throw new HttpError(502, `${file.filename} was stored and is gone again; retry`);
    return { kind: 'blob', digest: file.sha256, size: info.size };
  }

  #fly(up: UpstreamFile, file: ResolvedFile) {
    return this.#o.flights.open(`python-file:${file.sha256}`, () => this.#start(up, file), {
      recheck: async () => (await this.#o.blobs.stat(file.sha256)) !== null,
    });
  }

  async #start(up: UpstreamFile, file: ResolvedFile) {
    const res = await this.#get(up.url, file.filename);
    if (res.status !== 200) {
      res.body.resume();
      this.#o.counters.add('upstream_errors');
      const gone = res.status === 404 || res.status === 410;
      throw new HttpError(gone ? 404 : 502, `the upstream answered ${res.status} for ${file.filename}`);
    }
    const length = Number(header(res.headers, 'content-length'));
    return { body: res.body, expected: file.sha256, size: Number.isSafeInteger(length) ? length : undefined, meta: null };
  }

  async #get(url: string, filename: string) {
    try {
      return await this.#o.client.get(url);
    } catch (err) {
      // Our own concurrency cap (429) passes through as it is.
      if (err instanceof HttpError || err instanceof SlotsBusyError) throw err;
      this.#o.counters.add('upstream_errors');
      const why = err instanceof UpstreamError ? err.message : 'upstream request failed';
      throw new HttpError(502, `could not fetch ${filename} from the upstream: ${why}`);
    }
  }

  // ---- metadata siblings

  #linkKey(file: ResolvedFile): string {
    return `python/${this.#o.indexName}/cache/metadata/${file.sha256}`;
  }

  async #metadata(up: UpstreamFile, file: ResolvedFile): Promise<FileBody | null> {
    if (file.metadataSha256 === null && !file.metadataUnhashed) return null;
    let digest = file.metadataSha256 ?? (await this.#o.meta.get<MetadataLink>(this.#linkKey(file)))?.doc.sha256 ?? null;
    let info = digest ? await this.#o.blobs.stat(digest) : null;
    if (!info) {
      digest = await this.#metadataFlights.run(file.sha256, () => this.#obtainMetadata(up, file));
      info = digest ? await this.#o.blobs.stat(digest) : null;
    }
    return info ? { kind: 'blob', digest: info.digest, size: info.size } : null;
  }

  async #obtainMetadata(up: UpstreamFile, file: ResolvedFile): Promise<string | null> {
    if (up.metadata !== false) {
      const sibling = await this.#fetchSibling(up, file);
      if (sibling) return this.#storeMetadata(sibling, file);
    }
    if (file.kind !== 'wheel') return null;
    if (this.#ranges && !(await this.#o.blobs.stat(file.sha256))) {
      const ranged = await metadataByRanges({ client: this.#o.client, url: up.url, file, tmpDir: this.#o.tmpDir });
      if (ranged.kind === 'ok') return this.#storeMetadata(ranged.bytes, file);
      if (ranged.kind === 'no-ranges') this.#ranges = false;
    }
    return this.#storeMetadata(await this.#fromWheel(up, file), file);
  }

  async #fetchSibling(up: UpstreamFile, file: ResolvedFile): Promise<Buffer | null> {
    const url = new URL(up.url);
    url.pathname += '.metadata';
    const res = await this.#get(url.toString(), `${file.filename}.metadata`);
    if (res.status === 404 || res.status === 410) {
      res.body.resume();
      return null;
    }
    if (res.status !== 200) {
      res.body.resume();
      this.#o.counters.add('upstream_errors');
      throw new HttpError(502, `the upstream answered ${res.status} for ${file.filename}.metadata`);
    }
    try {
      return await readBounded(res, MAX_METADATA_BYTES);
    } catch (err) {
      if (err instanceof DocumentTooLargeError) {
        throw new HttpError(502, `the upstream's ${file.filename}.metadata is larger than ${MAX_METADATA_BYTES} bytes`);
      }
      throw err;
    }
  }

  async #storeMetadata(bytes: Buffer, file: ResolvedFile): Promise<string> {
    const expected = file.metadataSha256 ?? undefined;
    // Hashed here, not by the store: the hold must be taken before the bytes are stored.
    const digest = createHash('sha256').update(bytes).digest('hex');
    if (expected !== undefined && digest !== expected) {
      this.#o.counters.add('rejected');
      throw new HttpError(502, `the core metadata of ${file.filename} does not match the hash the upstream page gives; not cached`);
    }
    await this.#o.holder.hold(digest);
    const info = await this.#o.blobs.put(Readable.from([bytes]), digest);
    if (expected === undefined) await this.#o.meta.put<MetadataLink>(this.#linkKey(file), { sha256: info.digest });
    return info.digest;
  }

  /** The wheel's METADATA, from the store (fetching the wheel into it first when needed). */
  async #fromWheel(up: UpstreamFile, file: ResolvedFile): Promise<Buffer> {
    if (!(await this.#o.blobs.stat(file.sha256))) {
      const delivery = await this.#fly(up, file);
      if (delivery) {
        delivery.stream.on('error', () => undefined);
        delivery.stream.resume();
        const outcome = await delivery.outcome;
        if (outcome.kind === 'rejected') throw new HttpError(502, `${file.filename} from the upstream does not match its sha256; not cached`);
        if (outcome.kind !== 'published' && outcome.kind !== 'already_stored') {
          throw new HttpError(502, `could not fetch ${file.filename} from the upstream to read its metadata`);
        }
      }
    }
    const source = await blobSource(this.#o.blobs, file.sha256);
    if (!source) throw new HttpError(502, `${file.filename} is not stored; retry`);
    try {
      return await readWheelMetadata(source, file.filename, this.#o.tmpDir);
    } catch (err) {
      if (err instanceof ArchiveError) throw new HttpError(502, `cannot read the METADATA of ${file.filename}: ${err.message}`);
      throw err;
    }
  }
}
