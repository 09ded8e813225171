/**
 * Builds the web UI's bundle (`npm run build`): `src/main.ts` and `src/style.css`, minified by
 * esbuild, into `registry/dist/pkg/` as `app.<hash>.js` and `app.<hash>.css` (the hash of the
 * bytes, so a name never changes its content and browsers may keep it a year), each with a gzip
 * and a brotli twin the server picks by Accept-Encoding, and `manifest.json` naming them.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, gzipSync, constants } from 'node:zlib';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'dist', 'pkg');

async function bundle(entry: string): Promise<Buffer> {
  const result = await build({ entryPoints: [join(here, 'src', entry)], bundle: true, minify: true, format: 'esm', target: 'es2022', write: false, legalComments: 'none' });
  return Buffer.from(result.outputFiles[0]!.contents);
}

function emit(name: string, ext: string, body: Buffer): string {
  const file = `${name}.${createHash('sha256').update(body).digest('hex').slice(0, 16)}.${ext}`;
  writeFileSync(join(out, file), body);
  writeFileSync(join(out, `${file}.gz`), gzipSync(body, { level: 9 }));
  writeFileSync(join(out, `${file}.br`), brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }));
  return file;
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const script = emit('app', 'js', await bundle('main.ts'));
const style = emit('app', 'css', await bundle('style.css'));
writeFileSync(join(out, 'manifest.json'), `${JSON.stringify({ script, style })}\n`);
process.stdout.write(`ui bundle: ${readdirSync(out).length} files in ${out}\n`);
