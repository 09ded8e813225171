/**
 * Builds container images on the fly, so the OCI client suites fetch nothing from outside: gzip
 * tar layers of generated files, a config blob, an image manifest, and a multi-platform image
 * index, written as an OCI image layout directory (oci-layout, index.json, blobs/sha256/...) that
 * skopeo (`oci:DIR:TAG`), crane (`crane push DIR`) and regctl (`ocidir://DIR:TAG`) read.
 *
 * Everything is derived from a seed, so two builds with the same seed are byte-identical and two
 * different seeds never share a blob.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

export const MT = {
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  index: 'application/vnd.oci.image.index.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os: string; architecture: string };
  annotations?: Record<string, string>;
  artifactType?: string;
}

export interface Blob {
  descriptor: Descriptor;
  bytes: Buffer;
}

/** One image: its manifest and every blob it names. */
export interface Image {
  manifest: Blob;
  config: Blob;
  layers: Blob[];
  /** The files of each layer, by path, as put in the tar. */
  files: Map<string, Buffer>[];
  platform: { os: string; architecture: string };
}

/** A multi-platform image: the index and its images. */
export interface ImageIndex {
  index: Blob;
  images: Image[];
}

export function sha256(bytes: Buffer | string): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

export function blobOf(mediaType: string, bytes: Buffer): Blob {
  return { descriptor: { mediaType, digest: sha256(bytes), size: bytes.length }, bytes };
}

/** Deterministic pseudo-random bytes (sha256 in counter mode): incompressible, seed-dependent. */
export function pseudoRandom(seed: string, size: number): Buffer {
  const out = Buffer.alloc(size);
  let offset = 0;
  for (let counter = 0; offset < size; counter++) {
    const block = createHash('sha256').update(`${seed}/${counter}`).digest();
    offset += block.copy(out, offset, 0, Math.min(block.length, size - offset));
  }
  return out;
}

// --- tar (POSIX ustar), enough for regular files and directories ---------------------------------

function tarHeader(path: string, size: number, type: '0' | '5', mode: number): Buffer {
  const h = Buffer.alloc(512);
  let name = path;
  let prefix = '';
  if (Buffer.byteLength(name) > 100) {
    const cut = path.lastIndexOf('/', 155);
    if (cut <= 0 || Buffer.byteLength(path.slice(cut + 1)) > 100) throw new Error(`tar path too long: ${path}`);
    prefix = path.slice(0, cut);
    name = path.slice(cut + 1);
  }
  const octal = (n: number, width: number) => n.toString(8).padStart(width - 1, '0') + '\0';
  h.write(name, 0, 100, 'utf8');
  h.write(octal(mode, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii'); // uid
  h.write(octal(0, 8), 116, 'ascii'); // gid
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(1_700_000_000, 12), 136, 'ascii'); // fixed mtime: reproducible layers
  h.write('        ', 148, 'ascii'); // checksum placeholder
  h.write(type, 156, 'ascii');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  h.write('root', 265, 'ascii');
  h.write('root', 297, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'ascii');
  return h;
}

/** A tar archive of the files (parent directories are added as entries). */
export function tar(files: Map<string, Buffer>): Buffer {
  const parts: Buffer[] = [];
  const dirs = new Set<string>();
  for (const [path, content] of files) {
    const segments = path.split('/');
    for (let i = 1; i < segments.length; i++) {
      const dir = segments.slice(0, i).join('/') + '/';
      if (dirs.has(dir)) continue;
      dirs.add(dir);
      parts.push(tarHeader(dir, 0, '5', 0o755));
    }
    parts.push(tarHeader(path, content.length, '0', 0o644), content);
    const pad = (512 - (content.length % 512)) % 512;
    if (pad) parts.push(Buffer.alloc(pad));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

// --- images ------------------------------------------------------------------------------------

export interface ImageOptions {
  /** Distinguishes images: different seeds share no blob. */
  seed: string;
  platform?: { os: string; architecture: string };
  /** Number of layers (default 3). */
  layers?: number;
  /** Size of the incompressible file in the last layer (default 1.5 MiB, so uploads take chunks). */
  bigFileSize?: number;
}

/** Generates the files of layer `n`: text files, a nested tree, and one incompressible file. */
function layerFiles(seed: string, n: number, count: number, bigFileSize: number): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  files.set(`etc/velodex/layer-${n}.txt`, Buffer.from(`layer ${n} of image ${seed}\n`));
  files.set(`srv/${seed}/data-${n}/readme.md`, Buffer.from(`# ${seed}\n\nLayer ${n}.\n${'line of text\n'.repeat(50 * (n + 1))}`));
  files.set(`srv/${seed}/data-${n}/nested/deeper/values.json`, Buffer.from(JSON.stringify({ seed, layer: n, values: [n, n * 2, n * 3] }) + '\n'));
  files.set(`srv/${seed}/data-${n}/random.bin`, pseudoRandom(`${seed}/${n}/small`, 4096 + n * 1000));
  if (n === count - 1) files.set(`srv/${seed}/big.bin`, pseudoRandom(`${seed}/big`, bigFileSize));
  return files;
}

export function buildImage(opts: ImageOptions): Image {
  const platform = opts.platform ?? { os: 'linux', architecture: 'amd64' };
  const count = opts.layers ?? 3;
  const bigFileSize = opts.bigFileSize ?? 1536 * 1024;
  const files: Map<string, Buffer>[] = [];
  const layers: Blob[] = [];
  const diffIds: string[] = [];
  for (let n = 0; n < count; n++) {
    const f = layerFiles(`${opts.seed}-${platform.architecture}`, n, count, bigFileSize);
    const raw = tar(f);
    files.push(f);
    diffIds.push(sha256(raw));
    layers.push(blobOf(MT.layer, gzipSync(raw)));
  }
  const configJson = {
    created: '2024-01-01T00:00:00Z',
    architecture: platform.architecture,
    os: platform.os,
    config: { Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'], Labels: { 'org.example.seed': opts.seed } },
    rootfs: { type: 'layers', diff_ids: diffIds },
    history: diffIds.map((_, n) => ({ created: '2024-01-01T00:00:00Z', created_by: `velodex test layer ${n}` })),
  };
  const config = blobOf(MT.config, Buffer.from(JSON.stringify(configJson)));
  const manifestJson = {
    schemaVersion: 2,
    mediaType: MT.manifest,
    config: config.descriptor,
    layers: layers.map((l) => l.descriptor),
    annotations: { 'org.opencontainers.image.title': opts.seed },
  };
  // Indented on purpose: a registry that re-serialises the manifest changes its digest.
  const manifest = blobOf(MT.manifest, Buffer.from(JSON.stringify(manifestJson, null, 2) + '\n'));
  return { manifest, config, layers, files, platform };
}

export const PLATFORMS = [
  { os: 'linux', architecture: 'amd64' },
  { os: 'linux', architecture: 'arm64' },
];

/** A multi-platform image (linux/amd64 + linux/arm64 unless told). */
export function buildIndex(seed: string, platforms = PLATFORMS, layers = 2): ImageIndex {
  const images = platforms.map((platform) => buildImage({ seed, platform, layers, bigFileSize: 256 * 1024 }));
  const indexJson = {
    schemaVersion: 2,
    mediaType: MT.index,
    manifests: images.map((img) => ({ ...img.manifest.descriptor, platform: img.platform })),
  };
  const index = blobOf(MT.index, Buffer.from(JSON.stringify(indexJson, null, 2) + '\n'));
  return { index, images };
}

/** Every blob of an image or index, the manifests included. */
export function allBlobs(item: Image | ImageIndex): Blob[] {
  if ('index' in item) return [item.index, ...item.images.flatMap((img) => allBlobs(img))];
  return [item.manifest, item.config, ...item.layers];
}

// --- OCI image layout --------------------------------------------------------------------------

const REF_NAME = 'org.opencontainers.image.ref.name';

export interface LayoutEntry {
  tag: string;
  item: Image | ImageIndex;
}

/** Writes (or adds to) an OCI image layout directory; each entry is listed in index.json by tag. */
export function writeLayout(dir: string, entries: LayoutEntry[]): string {
  mkdirSync(join(dir, 'blobs', 'sha256'), { recursive: true });
  writeFileSync(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  const indexPath = join(dir, 'index.json');
  const index = existsSync(indexPath)
    ? (JSON.parse(readFileSync(indexPath, 'utf8')) as { manifests: Descriptor[] })
    : { manifests: [] as Descriptor[] };
  for (const { tag, item } of entries) {
    for (const blob of allBlobs(item)) writeFileSync(blobPath(dir, blob.descriptor.digest), blob.bytes);
    const top = 'index' in item ? item.index : item.manifest;
    index.manifests = index.manifests.filter((d) => d.annotations?.[REF_NAME] !== tag);
    index.manifests.push({ mediaType: top.descriptor.mediaType, digest: top.descriptor.digest, size: top.descriptor.size, annotations: { [REF_NAME]: tag } });
  }
  writeFileSync(indexPath, JSON.stringify({ schemaVersion: 2, mediaType: MT.index, manifests: index.manifests }));
  return dir;
}

export function blobPath(dir: string, digest: string): string {
  const [alg, hex] = digest.split(':');
  if (!alg || !hex) throw new Error(`bad digest ${digest}`);
  return join(dir, 'blobs', alg, hex);
}

/** What a client wrote into a layout directory. */
export interface Layout {
  dir: string;
  /** index.json's descriptors. */
  manifests: Descriptor[];
  /** The descriptor index.json lists for a tag (skopeo and regctl record it as ref.name). */
  byTag(tag: string): Descriptor | undefined;
  blob(digest: string): Buffer;
  hasBlob(digest: string): boolean;
  /** Every blob file present, by digest. */
  digests(): string[];
}

export function readLayout(dir: string): Layout {
  const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as { manifests?: Descriptor[] };
  const manifests = index.manifests ?? [];
  return {
    dir,
    manifests,
    byTag: (tag) => manifests.find((d) => d.annotations?.[REF_NAME] === tag),
    blob: (digest) => readFileSync(blobPath(dir, digest)),
    hasBlob: (digest) => existsSync(blobPath(dir, digest)),
    digests: () =>
      readdirSync(join(dir, 'blobs'), { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .flatMap((d) => readdirSync(join(dir, 'blobs', d.name)).map((hex) => `${d.name}:${hex}`)),
  };
}

/** Differences between the expected blobs and what a layout holds: digest and bytes must match. */
export function layoutMismatches(layout: Layout, expected: Blob[]): string[] {
  const problems: string[] = [];
  for (const blob of expected) {
    const { digest, mediaType } = blob.descriptor;
    if (!layout.hasBlob(digest)) {
      problems.push(`missing ${mediaType} ${digest}`);
      continue;
    }
    const got = layout.blob(digest);
    if (!got.equals(blob.bytes)) problems.push(`different bytes for ${mediaType} ${digest} (got ${got.length} bytes, sha ${sha256(got)})`);
  }
  return problems;
}
