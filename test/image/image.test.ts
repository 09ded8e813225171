/**
 * The image `make image` builds, run as a user runs it: imported into a private containerd with
 * `ctr images import` and started with `ctr run` (runc, the host's network namespace, its own
 * port); then the registry inside answers, takes an upload and serves it, and the same image
 * starts the operator binary. Also: the same sources build the same digest, and `crane push`
 * takes the archive as it is (a registry then serves the image's config).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVING_V8_FLAGS } from '../../registry/src/workers/v8-flags.js';
import { startContainerd, type Containerd } from '../support/containerd.js';
import { startDistribution } from '../support/distribution.js';
import { REPO, tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { freePort } from '../support/pypiserver.js';
import { basicAuth, tempDir } from '../support/velodex.js';

const NAME = 'docker.io/velodex/velodex:test';
// runc keeps container state in one folder per containerd namespace for the whole machine: ids
// unique to this run never meet a container another run left behind.
const RUN = `${process.pid}-${Date.now().toString(36)}`;
const REGISTRY = `velodex-registry-${RUN}`;
const OPERATOR = `velodex-operator-${RUN}`;
let work: string;
let archive: string;
let containerd: Containerd;

function buildImage(out: string): string {
  execFileSync(process.execPath, ['--import', 'tsx', join(REPO, 'hack', 'image', 'build.ts'), '--out', out, '--name', NAME], { cwd: REPO, stdio: 'pipe' });
  return createHash('sha256').update(readFileSync(out)).digest('hex');
}

beforeAll(async () => {
  work = tempDir('velodex-image-');
  archive = join(work, 'velodex.oci.tar');
  buildImage(archive);
  containerd = await startContainerd(work);
}, 600_000);

afterAll(async () => {
  for (const id of [REGISTRY, OPERATOR]) {
    await containerd?.ctr(['tasks', 'kill', '-s', 'SIGKILL', id], { allowFailure: true });
    await containerd?.ctr(['containers', 'delete', id], { allowFailure: true });
  }
  await containerd?.stop();
});

describe('make image', () => {
  it('builds the same archive from the same sources', () => {
    const first = createHash('sha256').update(readFileSync(archive)).digest('hex');
    expect(buildImage(join(work, 'again.oci.tar'))).toBe(first);
  });

  it('is pushed to a registry by crane push, as it is', async () => {
    const registry = await startDistribution(tempDir('velodex-image-registry-'), null);
    try {
      const env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
      await run(tool('crane'), ['push', '--insecure', archive, `${registry.host}/velodex/velodex:test`], { env });
      const config = JSON.parse((await run(tool('crane'), ['config', '--insecure', `${registry.host}/velodex/velodex:test`], { env })).stdout) as { config?: { Entrypoint?: string[] } };
      // The serving V8 flags ride on the command line (registry/src/workers/v8-flags.ts).
      expect(config.config?.Entrypoint).toEqual(['/usr/local/bin/node', ...SERVING_V8_FLAGS, '/app/registry/dist/cli.js']);
      expect(SERVING_V8_FLAGS).toContain('--no-memory-reducer');
    } finally {
      await registry.stop();
    }
  });

  it('imports into containerd and runs the registry as an unprivileged user; the operator starts from it too', async () => {
    const imported = await containerd.ctr(['images', 'import', archive]);
    expect(imported.stdout + imported.stderr).toContain(NAME);
    const port = await freePort();
    const token = 'image-test-token';
    const task = containerd.ctr(
      ['run', '--rm', '--net-host', '--env', `VELODEX_UPLOAD_TOKEN=${token}`, NAME, REGISTRY, '/usr/local/bin/node', '/app/registry/dist/cli.js', 'serve', '--host', '127.0.0.1', '--port', String(port), '--data-dir', '/tmp/velodex'],
      { allowFailure: true, timeoutMs: 120_000 },
    );
    const url = `http://127.0.0.1:${port}`;
    let healthy = false;
    for (let i = 0; i < 200 && !healthy; i++) {
      healthy = await fetch(`${url}/healthz`).then((r) => r.ok, () => false);
      if (!healthy) await new Promise((r) => setTimeout(r, 100));
    }
    expect(healthy).toBe(true);
    const status = (await (await fetch(`${url}/+status`)).json()) as { indexes: { route: string }[] };
    expect(status.indexes.map((i) => i.route).sort()).toEqual(['root/hosted', 'root/oci']);
    // The process runs as 65532, not root.
    const ps = await containerd.ctr(['tasks', 'exec', '--exec-id', 'id', REGISTRY, '/usr/local/bin/node', '-e', 'process.stdout.write(String(process.getuid()))']);
    expect(ps.stdout).toBe('65532');
    // An OCI blob push and pull through the registry in the container.
    const blob = Buffer.from('hello from the image test');
    const digest = `sha256:${createHash('sha256').update(blob).digest('hex')}`;
    const auth = { authorization: basicAuth(token) };
    const put = await fetch(`${url}/v2/root/oci/t/blobs/uploads/?digest=${digest}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/octet-stream' }, body: blob });
    expect(put.status).toBe(201);
    expect(Buffer.from(await (await fetch(`${url}/v2/root/oci/t/blobs/${digest}`)).arrayBuffer()).equals(blob)).toBe(true);
    await containerd.ctr(['tasks', 'kill', '-s', 'SIGTERM', REGISTRY]);
    await task;

    // The operator binary is in the image; without a cluster it says so and exits non-zero.
    const operator = await containerd.ctr(['run', '--rm', '--net-host', '--env', 'VELODEX_IMAGE=x', NAME, OPERATOR, '/usr/local/bin/node', '/app/operator/dist/main.js'], { allowFailure: true, timeoutMs: 60_000 });
    expect(operator.code).not.toBe(0);
    expect(operator.stdout + operator.stderr).toMatch(/operator failed to start.*cannot reach the Kubernetes API/);
  });
});
