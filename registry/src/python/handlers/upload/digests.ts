/**
 * The digests an upload form may claim for its file (`sha256_digest`, `md5_digest`,
 * `blake2_256_digest`, as twine and uv send them) and their check against the bytes. sha256 is
 * the file's address and the store's stage computes it on the way in (it is the digest that gets
 * committed); md5 and BLAKE2b-256 cost CPU, so each is computed only when the form carries its field.
 */
import { createHash, type Hash } from 'node:crypto';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { createBLAKE2b } from 'hash-wasm';
import { badUpload } from './errors.js';

export type ExtraDigest = 'md5' | 'blake2_256';

/** Form field → algorithm. */
export const DIGEST_FIELDS = { sha256_digest: 'sha256', md5_digest: 'md5', blake2_256_digest: 'blake2_256' } as const;

type Algorithm = (typeof DIGEST_FIELDS)[keyof typeof DIGEST_FIELDS];

interface Hasher {
  update(chunk: Uint8Array): void;
  hex(): string;
}

async function hasher(algorithm: Algorithm): Promise<Hasher> {
  if (algorithm === 'blake2_256') {
    // Node's crypto has BLAKE2b only with a 512-bit output, and the output length is a parameter
    // of BLAKE2, not a truncation; PyPI's is BLAKE2b with 32 bytes. hash-wasm's runs at about
    // sha256's speed, where pure-JS implementations are some 20 times slower.
    const h = await createBLAKE2b(256);
    h.init();
    return { update: (c) => h.update(c), hex: () => h.digest('hex') };
  }
  const h: Hash = createHash(algorithm);
  return { update: (c) => h.update(c), hex: () => h.digest('hex') };
}

/** Hashes what flows through it: the extra digests asked for (sha256 and the size are the stage's). */
export class ArtifactHashing extends Transform {
  private constructor(private readonly hashers: ReadonlyMap<Algorithm, Hasher>) {
    super();
  }

  static async create(extra: Iterable<ExtraDigest>): Promise<ArtifactHashing> {
    const algorithms: Algorithm[] = [...extra];
    return new ArtifactHashing(new Map(await Promise.all(algorithms.map(async (a) => [a, await hasher(a)] as const))));
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    for (const h of this.hashers.values()) h.update(chunk);
    done(null, chunk);
  }

  /** Hex digests by algorithm; call once, after the stream has ended. */
  digests(): Partial<Record<Algorithm, string>> {
    return Object.fromEntries([...this.hashers].map(([algorithm, h]) => [algorithm, h.hex()]));
  }
}

/** The extra digests the form claims so far (decides what to compute while the file streams). */
export function claimedExtraDigests(fields: ReadonlyMap<string, string[]>): ExtraDigest[] {
  const wanted: ExtraDigest[] = [];
  if (fields.has('md5_digest')) wanted.push('md5');
  if (fields.has('blake2_256_digest')) wanted.push('blake2_256');
  return wanted;
}

/**
 * Refuses the upload when a digest field does not match the file. A digest field that arrived
 * after the file part (twine sends them before it) is checked by reading the staged bytes again.
 */
export async function checkClaimedDigests(
  fields: ReadonlyMap<string, string[]>,
  filename: string,
  readBack: () => Readable,
  computed: Partial<Record<Algorithm, string>>,
): Promise<void> {
  const known = { ...computed };
  const missing = (Object.values(DIGEST_FIELDS) as Algorithm[]).filter((a) => known[a] === undefined && fields.has(fieldOf(a)));
  if (missing.length > 0) Object.assign(known, await hashAgain(readBack(), missing));
  for (const [field, algorithm] of Object.entries(DIGEST_FIELDS) as [keyof typeof DIGEST_FIELDS, Algorithm][]) {
    for (const value of fields.get(field) ?? []) {
      const claimed = value.trim().toLowerCase();
      // An empty field is "not given" (some clients send every key of the metadata).
      if (claimed === '') continue;
      if (claimed !== known[algorithm]) {
        throw badUpload(`${field} ${claimed} does not match the uploaded bytes of ${filename} (${algorithm} ${known[algorithm]})`);
      }
    }
  }
}

function fieldOf(algorithm: Algorithm): string {
  return Object.entries(DIGEST_FIELDS).find(([, a]) => a === algorithm)![0];
}

async function hashAgain(bytes: Readable, algorithms: Algorithm[]): Promise<Partial<Record<Algorithm, string>>> {
  const hashers = await Promise.all(algorithms.map(async (a) => [a, await hasher(a)] as const));
  for await (const chunk of bytes) for (const [, h] of hashers) h.update(chunk as Buffer);
  return Object.fromEntries(hashers.map(([a, h]) => [a, h.hex()]));
}
