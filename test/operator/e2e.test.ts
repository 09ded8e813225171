/**
 * End to end on a real single-node cluster (test/support/kube-node.ts) with real pods: the Helm
 * chart installs the operator and a trial MinIO, a PackageRegistry and four PackageIndexes are
 * applied with kubectl, `kubectl wait --for=condition=Ready` returns, and twine, pip and crane
 * work through the registry's Service. Then the things a platform team does and breaks: a token
 * rotated (the pods roll; the old token is refused, the new one accepted), a registry pod killed
 * (replaced, nothing lost), the registry scaled to zero (NoReadyPods) and back.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { argoHealth } from '../support/argocd-health.js';
import { until as untilSeen } from '../support/until.js';
import { startKubeNode, type KubeNode } from '../support/kube-node.js';
import { REPO, TOOLS, tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tempDir } from '../support/velodex.js';

const NS = 'team';
const TOKEN_ONE = 'e2e-token-one-3f9a';
const TOKEN_TWO = 'e2e-token-two-81c2';
let node: KubeNode;
let work: string;
let service: string;
let project: BuiltProject;

const k = (args: string[], input?: string) => node.kubectl(args, { input });

/** Polls until the cluster has done something, with its state when it never does. */
function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 180_000): Promise<T> {
  const context = async () => `${(await node.kubectl(['get', 'pods,pidx,packageregistry', '-A', '-o', 'wide'], { allowFailure: true })).stdout}\n${node.logs().slice(-4000)}`;
  return untilSeen(what, check, { timeoutMs, intervalMs: 1000, context });
}

/** Every pod of the registry runs the Deployment's current template, and none is terminating. */
async function untilOnlyNewPods(): Promise<void> {
  await until('only pods of the current template', async () => {
    const pods = JSON.parse((await k(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/instance=default', '-o', 'json'])).stdout) as { items: { metadata: { deletionTimestamp?: string } }[] };
    return pods.items.length === 2 && pods.items.every((p) => !p.metadata.deletionTimestamp) ? true : undefined;
  });
}

function twine(token: string, files: string[], allowFailure = false) {
  return run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `http://${service}/team/hosted/`, '-u', '__token__', '-p', token, ...files], { allowFailure, env: { NO_COLOR: '1' } });
}

function pip(args: string[]) {
  return run(tool('pip'), [...args, '--trusted-host', service.split(':')[0] ?? service, '--index-url', `http://${service}/team/all/simple/`], { env: { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1' } });
}

beforeAll(async () => {
  work = tempDir('velodex-e2e-');
  const image = join(work, 'velodex.oci.tar');
  await run(process.execPath, ['--import', 'tsx', join(REPO, 'hack', 'image', 'build.ts'), '--out', image, '--name', 'docker.io/velodex/velodex:e2e'], { timeoutMs: 300_000 });
  project = await buildProject('e2e-demo', '1.0');
  node = await startKubeNode();
  await node.importImage(image);
  await node.importImage(join(TOOLS, 'images', 'minio.tar'));
  const helm = await run(
    tool('helm'),
    ['install', 'velodex', join(REPO, 'charts', 'velodex'), '-n', 'velodex-system', '--create-namespace', '--set', 'image.tag=e2e', '--set', 'image.pullPolicy=Never', '--set', 'minio.enabled=true', '--set', 'minio.secretKey=e2e-minio-secret', '--set', 'minio.image=docker.io/velodex/minio:e2e', '--set', 'operator.resyncSeconds=3'],
    { env: node.env, timeoutMs: 120_000 },
  );
  expect(helm.stdout).toContain('STATUS: deployed');
  await k(['rollout', 'status', 'deployment/velodex-operator', 'deployment/velodex-minio', '-n', 'velodex-system', '--timeout=180s']);
  await k(['wait', '--for=condition=complete', 'job/velodex-minio-bucket', '-n', 'velodex-system', '--timeout=180s']);
}, 900_000);

afterAll(async () => {
  await node?.stop();
});

describe('a platform team on a real cluster', () => {
  it('declares a registry and its indexes with kubectl; kubectl wait says Ready; kubectl get shows them served', async () => {
    await k(['create', 'namespace', NS]);
    await k(['create', 'secret', 'generic', 's3', '-n', NS, '--from-literal=access-key=velodex', '--from-literal=secret-key=e2e-minio-secret']);
    await k(['create', 'secret', 'generic', 'upload-tokens', '-n', NS, `--from-literal=hosted=${TOKEN_ONE}`]);
    await k(['apply', '-f', join(REPO, 'docs', 'examples', 'team.yaml')]);
    await k(['wait', '--for=condition=Ready', 'pidx/hosted', 'pidx/all', 'pidx/images', 'pidx/pypi', '-n', NS, '--timeout=240s']);
    // Ready: every ready pod serves them. The registry is Ready once its pods all run this config.
    await k(['wait', '--for=condition=Ready', 'packageregistry/default', '-n', NS, '--timeout=240s']);
    const table = (await k(['get', 'packageindex', '-n', NS])).stdout;
    for (const name of ['all', 'hosted', 'images', 'pypi']) expect(table).toMatch(new RegExp(`^${name}\\s+team/${name}\\s+\\S+\\s+\\S+\\s+default\\s+True`, 'm'));
    expect((await argoHealth('PackageIndex', JSON.parse((await k(['get', 'pidx', 'hosted', '-n', NS, '-o', 'json'])).stdout))).status).toBe('Healthy');
    const ip = (await k(['get', 'service', 'default', '-n', NS, '-o', 'jsonpath={.spec.clusterIP}'])).stdout.trim();
    service = ip;
  });

  it('serves twine, pip and crane through the registry Service, from pods over the in-cluster MinIO', async () => {
    await twine(TOKEN_ONE, [project.wheel, project.sdist]);
    const dest = join(work, 'pip-1');
    await pip(['download', '--no-deps', '-d', dest, 'e2e-demo==1.0']);
    expect(readFileSync(join(dest, project.wheelFilename)).equals(readFileSync(project.wheel))).toBe(true);

    const img = buildImage({ seed: 'e2e' });
    const layout = writeLayout(join(work, 'layout'), [{ tag: 'v1', item: img }]);
    const docker = join(work, 'docker');
    mkdirSync(docker, { recursive: true });
    const crane = (args: string[], input?: string) =>
      run(tool('crane'), [...args, '--insecure'], { env: { DOCKER_CONFIG: docker, HOME: work }, input }).catch(async (err: Error) => {
        const state = (await node.kubectl(['get', 'pods,events', '-A', '-o', 'wide'], { allowFailure: true })).stdout;
        throw new Error(`${err.message}\n${state}`);
      });
    await crane(['auth', 'login', service, '-u', '__token__', '--password-stdin'], TOKEN_ONE);
    await crane(['push', layout, `${service}/team/images/app:v1`]);
    expect((await crane(['digest', `${service}/team/images/app:v1`])).stdout.trim()).toBe(img.manifest.descriptor.digest);
  });

  it('rolls the pods for an index edit while a polling client sees no failed request', async () => {
    const url = `http://${service}/team/hosted/simple/e2e-demo/`;
    let ok = 0;
    const failures: string[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        try {
          const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
          await res.arrayBuffer();
          if (res.status === 200) ok++;
          else failures.push(`status ${res.status}`);
        } catch (err) {
          failures.push(String((err as Error).cause ?? err));
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const before = (await k(['get', 'configmap', 'default-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout;
    await k(['patch', 'pidx', 'pypi', '-n', NS, '--type=merge', '-p', '{"spec":{"upstreamConcurrency":5}}']);
    await until('the edit in the ConfigMap', async () => {
      const now = (await k(['get', 'configmap', 'default-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout;
      return now !== before && now.includes('upstream_concurrency = 5') ? true : undefined;
    });
    await until('the roll to start', async () => ((await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.status.updatedReplicas}/{.status.replicas}'])).stdout !== '2/2' ? true : undefined), 60_000).catch(() => undefined);
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await new Promise((r) => setTimeout(r, 2000));
    polling = false;
    await poller;
    expect(failures).toEqual([]);
    expect(ok).toBeGreaterThan(20);
  });

  it('rolls the pods when the upload token rotates: the old token is refused, the new one accepted', async () => {
    const before = (await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.spec.template.metadata.annotations.velodex\\.dev/config-checksum}'])).stdout;
    const secret = (await k(['create', 'secret', 'generic', 'upload-tokens', '-n', NS, `--from-literal=hosted=${TOKEN_TWO}`, '--dry-run=client', '-o', 'yaml'])).stdout;
    await k(['apply', '-f', '-'], secret);
    await until('a new checksum', async () => {
      const now = (await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.spec.template.metadata.annotations.velodex\\.dev/config-checksum}'])).stdout;
      return now !== before ? now : undefined;
    });
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await k(['wait', '--for=condition=Ready', 'pidx/hosted', '-n', NS, '--timeout=120s']);
    // The roll is over when the old pods are gone: a terminating pod keeps serving (with the old
    // token) for its preStop sleep while the endpoints that name it are withdrawn.
    await untilOnlyNewPods();
    const other = await buildProject('e2e-rotated', '1.0');
    const refused = await twine(TOKEN_ONE, [other.wheel], true);
    expect(refused.code).not.toBe(0);
    expect(refused.stdout + refused.stderr).toContain('401 Unauthorized');
    await twine(TOKEN_TWO, [other.wheel]);
  });

  it('replaces a killed registry pod and loses nothing; scaled to zero it is NoReadyPods, and Ready again after', async () => {
    const pods = (await k(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/instance=default', '-o', 'jsonpath={.items[0].metadata.name}'])).stdout.trim();
    await k(['delete', 'pod', pods, '-n', NS, '--wait=false']);
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await pip(['download', '--no-deps', '-d', join(work, 'pip-2'), 'e2e-demo==1.0']);

    await k(['patch', 'packageregistry', 'default', '-n', NS, '--type=merge', '-p', '{"spec":{"replicas":0}}']);
    const reason = await until('NoReadyPods', async () => {
      const r = (await k(['get', 'pidx', 'hosted', '-n', NS, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].reason}'])).stdout;
      return r === 'NoReadyPods' ? r : undefined;
    });
    expect(reason).toBe('NoReadyPods');
    expect((await k(['get', 'pidx', 'hosted', '-n', NS])).stdout).toMatch(/hosted\s+team\/hosted\s+python\s+hosted\s+default\s+False/);
    await k(['patch', 'packageregistry', 'default', '-n', NS, '--type=merge', '-p', '{"spec":{"replicas":2}}']);
    await k(['wait', '--for=condition=Ready', 'pidx/hosted', '-n', NS, '--timeout=240s']);
    await pip(['download', '--no-deps', '-d', join(work, 'pip-3'), 'e2e-demo==1.0']);
  });
});
