/**
 * The images a single-node test cluster needs besides velodex's own, built without a registry or
 * a Docker engine (nothing can be pulled here) as OCI archives for `ctr images import`:
 *
 *   registry.k8s.io/pause:3.10    pause.c from the kubernetes module, `gcc -static`
 *   docker.io/velodex/minio:e2e   the MinIO binary `make tools` builds, with the C library it links
 *   docker.io/velodex/coredns:e2e CoreDNS (Go module proxy), the cluster's DNS
 *
 * Usage: node --import tsx hack/cluster/images.ts OUT_DIR (writes pause.tar, minio.tar, coredns.tar)
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { imageArchive, layer, type Entry } from '../image/oci-archive.js';

const REPO = resolve(import.meta.dirname, '..', '..');
const TOOLS = join(REPO, '.tools', 'bin');

/** A binary and the shared libraries `ldd` lists for it, at their paths. */
function withLibraries(binary: string, at: string): Entry[] {
  const out: Entry[] = [{ path: at, data: readFileSync(binary), mode: 0o755 }];
  const ldd = execFileSync('ldd', [binary], { encoding: 'utf8' });
  if (ldd.includes('not a dynamic executable')) return out;
  for (const line of ldd.split('\n')) {
    const m = /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(line);
    if (m?.[1]) out.push({ path: m[1].replace(/^\//, ''), data: readFileSync(m[1]), mode: 0o755 });
  }
  return out;
}

async function pause(out: string): Promise<void> {
  const modcache = execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8' }).trim();
  const source = join(modcache, 'k8s.io', 'kubernetes@v1.34.2', 'build', 'pause', 'linux', 'pause.c');
  if (!existsSync(source)) throw new Error(`${source} is missing: run make tools (hack/k8s-tools.sh downloads the kubernetes module)`);
  const bin = join(out, 'pause.bin');
  execFileSync('gcc', ['-Os', '-static', '-DVERSION=3.10', '-o', bin, source]);
  const { tar } = await imageArchive({
    layers: [await layer([{ path: 'pause', data: readFileSync(bin), mode: 0o755 }])],
    name: 'registry.k8s.io/pause:3.10',
    config: { Entrypoint: ['/pause'], User: '65535:65535' },
  });
  writeFileSync(join(out, 'pause.tar'), tar);
}

async function goImage(out: string, file: string, name: string, binary: string, at: string, config: Record<string, unknown>): Promise<void> {
  const { tar } = await imageArchive({
    layers: [await layer([...withLibraries(binary, at), { path: 'tmp', mode: 0o1777 }, { path: 'data', mode: 0o777 }])],
    name,
    config: { User: '65532:65532', Env: ['HOME=/tmp'], ...config },
  });
  writeFileSync(join(out, file), tar);
}

async function main(): Promise<void> {
  const out = resolve(process.argv[2] ?? join(REPO, '.tools', 'images'));
  mkdirSync(out, { recursive: true });
  await pause(out);
  await goImage(out, 'minio.tar', 'docker.io/velodex/minio:e2e', join(TOOLS, 'minio'), 'usr/local/bin/minio', { Entrypoint: ['/usr/local/bin/minio'] });
  await goImage(out, 'coredns.tar', 'docker.io/velodex/coredns:e2e', join(TOOLS, 'coredns'), 'coredns', { Entrypoint: ['/coredns'] });
  process.stdout.write(`${out}: pause.tar minio.tar coredns.tar\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`cluster images: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
