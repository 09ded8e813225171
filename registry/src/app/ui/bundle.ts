/**
 * The client bundle under `/pkg/*`, built by `npm run build` (registry/ui/build.ts) into
 * `dist/pkg/`: content-hashed file names, each with a gzip and a brotli twin, and `manifest.json`
 * naming the current script and stylesheet. Files are read once at start-up into memory (they
 * are a few KiB) and served with a year's cache lifetime: a new build gets new names.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface BundleFile {
  body: Buffer;
  gzip: Buffer | null;
  br: Buffer | null;
  type: string;
  etag: string;
}

export interface Bundle {
  /** `/pkg/app.<hash>.js` and `/pkg/app.<hash>.css`, or null when the bundle was not built. */
  script: string | null;
  style: string | null;
  files: ReadonlyMap<string, BundleFile>;
}

const TYPES: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };

export function loadBundle(dir = fileURLToPath(new URL('../../pkg/', import.meta.url))): Bundle {
  const files = new Map<string, BundleFile>();
  if (!existsSync(`${dir}/manifest.json`)) return { script: null, style: null, files };
  const manifest = JSON.parse(readFileSync(`${dir}/manifest.json`, 'utf8')) as { script: string; style: string };
  for (const name of readdirSync(dir)) {
    const ext = /\.(js|css)$/.exec(name)?.[1];
    if (!ext) continue;
    const read = (suffix: string) => (existsSync(`${dir}/${name}${suffix}`) ? readFileSync(`${dir}/${name}${suffix}`) : null);
    const hash = /\.([0-9a-f]{8,})\.(js|css)$/.exec(name)?.[1] ?? name;
    files.set(name, { body: readFileSync(`${dir}/${name}`), gzip: read('.gz'), br: read('.br'), type: TYPES[ext]!, etag: `"${hash}"` });
  }
  return { script: `/pkg/${manifest.script}`, style: `/pkg/${manifest.style}`, files };
}
