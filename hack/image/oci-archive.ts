/**
 * OCI image archives without a Docker engine: reproducible gzipped layers from file entries, and
 * the tar of an OCI image layout (oci-layout, index.json, blobs) that `ctr images import` and
 * `kind load image-archive` take, with the `manifest.json` of `docker save` beside it (as Docker's
 * own saves have since v25) so `crane push` and `docker load` take it too. Every tar entry has a fixed time and owner and
 * entries are sorted, so the same files give the same digests.
 */
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gunzipSync, gzipSync, constants as zlib } from 'node:zlib';
import { pack } from 'tar-stream';

export interface Entry {
  path: string;
  /** File bytes, or a symlink target, or nothing for a directory. */
  data?: Buffer;
  link?: string;
  mode: number;
}


/** A reproducible gzipped tar of `entries` (sorted; parents first; root-owned; time 0). */
export async function layer(entries: Entry[]): Promise<{ gz: Buffer; diffId: string }> {
  const all = new Map<string, Entry>();
  for (const e of entries) {
    const parts = e.path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (!all.has(dir)) all.set(dir, { path: dir, mode: 0o755 });
    }
    all.set(e.path, e);
  }
  const t = pack();
  const chunks: Buffer[] = [];
  t.on('data', (c: unknown) => chunks.push(c as Buffer));
  const done = new Promise<void>((r) => t.on('end', () => r()));
  for (const e of [...all.values()].sort((a, b) => (a.path < b.path ? -1 : 1))) {
    const header = { name: e.path, mode: e.mode, uid: 0, gid: 0, uname: '', gname: '', mtime: new Date(0) };
    if (e.link !== undefined) t.entry({ ...header, type: 'symlink', linkname: e.link });
    else if (e.data !== undefined) t.entry({ ...header, type: 'file', size: e.data.length }, e.data);
    else t.entry({ ...header, type: 'directory' });
  }
  t.finalize();
  await done;
  const tarBytes = Buffer.concat(chunks);
  return { gz: gzipSync(tarBytes, { level: zlib.Z_BEST_COMPRESSION }), diffId: `sha256:${sha(tarBytes)}` };
}

export const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/** Every file below `dir` as entries under `prefix` (symlinks kept as links). */
export function tree(dir: string, prefix: string, skip: (rel: string) => boolean = () => false): Entry[] {
  const out: Entry[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      const rel = relative(dir, full);
      if (skip(rel)) continue;
      const st = lstatSync(full);
      const path = `${prefix}/${rel}`;
      if (st.isSymbolicLink()) out.push({ path, link: readlinkSync(full), mode: 0o777 });
      else if (st.isDirectory()) {
        out.push({ path, mode: 0o755 });
        walk(full);
      } else out.push({ path, data: readFileSync(full), mode: st.mode & 0o111 ? 0o755 : 0o644 });
    }
  };
  walk(dir);
  return out;
}

export interface ImageSpec {
  layers: Array<{ gz: Buffer; diffId: string }>;
  /** The `config` member of the image config (Entrypoint, Cmd, User, Env, ...). */
  config: Record<string, unknown>;
  /** The full reference containerd names it by, e.g. `docker.io/velodex/velodex:dev`. */
  name: string;
}

/** The image as an uncompressed tar of an OCI image layout; returns it and the manifest digest. */
export async function imageArchive(spec: ImageSpec): Promise<{ tar: Buffer; digest: string }> {
  const config = Buffer.from(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      config: spec.config,
      rootfs: { type: 'layers', diff_ids: spec.layers.map((l) => l.diffId) },
      history: spec.layers.map(() => ({ created_by: 'hack/image' })),
    }),
  );
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${sha(config)}`, size: config.length },
      layers: spec.layers.map((l) => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: `sha256:${sha(l.gz)}`, size: l.gz.length })),
    }),
  );
  const index = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [
        {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          digest: `sha256:${sha(manifest)}`,
          size: manifest.length,
          annotations: { 'io.containerd.image.name': spec.name, 'org.opencontainers.image.ref.name': spec.name.split(':').pop() ?? 'latest' },
        },
      ],
    }),
  );
  const blobs = [config, manifest, ...spec.layers.map((l) => l.gz)];
  const blobPath = (b: Buffer) => `blobs/sha256/${sha(b)}`;
  const dockerSave = Buffer.from(JSON.stringify([{ Config: blobPath(config), RepoTags: [spec.name], Layers: spec.layers.map((l) => blobPath(l.gz)) }]));
  const archive = await layer([
    { path: 'oci-layout', data: Buffer.from('{"imageLayoutVersion":"1.0.0"}'), mode: 0o644 },
    { path: 'index.json', data: index, mode: 0o644 },
    { path: 'manifest.json', data: dockerSave, mode: 0o644 },
    ...blobs.map((b) => ({ path: blobPath(b), data: b, mode: 0o644 })),
  ]);
  // An image archive is a plain tar: undo the gzip of `layer`.
  return { tar: gunzipSync(archive.gz), digest: `sha256:${sha(manifest)}` };
}
