/**
 * End to end on a real single-node cluster (test/support/kube-node.ts) with real pods. It begins
 * with the previous release (PREVIOUS_RELEASE, built from git history by its own `make image`):
 * its Helm chart installs the operator and a trial MinIO, a PackageRegistry and four PackageIndexes
 * are applied with kubectl (the cached one pulls through a pypiserver on the cluster's bridge),
 * `kubectl wait --for=condition=Ready` returns, and twine, pip and crane store through the
 * registry's Service. Then the upgrade of docs/kubernetes.md to this tree's chart and image (CRDs
 * applied, `helm upgrade`) while a client polls every stored object, each request on a new connection
 * (no failed request), the new
 * version in /+status and the VERSION column, everything read back whole by pip and crane; the rest
 * runs on this tree's version. SIZE shows what each index stores; a pod pushes with its
 * ServiceAccount's projected token and no Secret, and a pod of another ServiceAccount is refused; a
 * private index is read from a pod with its ServiceAccount's token, and not without one.
 * Then the things a platform team does and breaks: an index edited while a
 * client polls (the pods roll, no request fails), a token rotated (the old token is refused, the
 * new one accepted), resources the operator refuses (missing Secret, unknown registry, a route
 * taken; an invalid spec refused at apply time), two operators with the leader killed
 * mid-reconcile, the upstream down (UpstreamOffline) and back. Then spec.storage.peerCache on
 * (the rest runs with it): every pod's /+status names every process, a tag moved or a wheel
 * uploaded through one pod is served by the other on its next request (each pod at its own IP),
 * and warm manifest GETs cost MinIO (almost) no object GET by its own counter. A registry pod
 * killed (replaced, nothing lost), the registry scaled to zero (NoReadyPods) and back. A second registry serves
 * HTTPS from a certificate Secret of a CA the suite makes: its renewal is served without a roll and
 * without a failed request to a client polling through it, then docker (trusting the CA in its
 * certs.d, no insecure-registry setting) logs in, pushes and pulls, and pip installs with the CA
 * and no trusted-host; its pods spread and limit their scratch by default, and its autoscaler and
 * NetworkPolicy (with the peers' rule; the cluster's bridge CNI plugin enforces none) come and go
 * with its spec.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect as connectTls, type TLSSocket } from 'node:tls';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { argoHealth } from '../support/argocd-health.js';
import { testCa, type IssuedCertificate } from '../support/certificates.js';
import { until as untilSeen } from '../support/until.js';
import { NODE_IP, startKubeNode, type KubeNode } from '../support/kube-node.js';
import { startPypiserver, type PypiServer } from '../support/pypiserver.js';
import { startDistribution, type Distribution } from '../support/distribution.js';
import { REPO, TOOLS, tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { CLEAN_ENV } from '../python/fixtures/clients.js';
import { buildImage, tar, writeLayout } from '../support/oci-image.js';
import { minioObjectGets } from '../support/minio.js';
import { startDockerd, type Dockerd } from '../support/dockerd.js';
import { buildPreviousRelease, type PreviousRelease } from '../support/previous-release.js';
import { tempDir } from '../support/velodex.js';
import { imageVersion } from '../../hack/image/version.js';

const NS = 'team';
/**
 * The release the suite installs first and upgrades from: the last one landed before this tree's
 * work. Move it forward when a release lands (it must be in the clone's history: no shallow clone).
 */
const PREVIOUS_RELEASE = '947b321';
/** This tree's image, and what its pods say they run (the version its build stamps). */
const IMAGE = 'docker.io/velodex/velodex:e2e';
let currentVersion: string;
let previous: PreviousRelease;
/** The install flow's scratch folder: the wheel it uploaded is in its dist/. */
let flowWork: string;
const TOKEN_ONE = 'e2e-token-one-3f9a';
const TOKEN_TWO = 'e2e-token-two-81c2';
let node: KubeNode;
let work: string;
let service: string;
let project: BuiltProject;
/** Only the upstream has it: pip finds it through the cached index and the virtual one. */
let upstreamProject: BuiltProject;
let upstreamDir: string;
let upstream: PypiServer;
/** The cached OCI index's upstream registry, on the bridge. */
let registryUpstream: Distribution | undefined;
/** The Docker engine of the TLS test, stopped by afterAll if that test fails. */
let dockerd: Dockerd | undefined;
/** What the registry acknowledged to the host's clients: read back whole after a pod is killed. */
const acknowledged = { wheels: [] as { project: string; version: string; file: string }[], images: [] as { ref: string; digest: string }[] };

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

function pip(args: string[], route = 'team/all') {
  return run(tool('pip'), [...args, '--trusted-host', service.split(':')[0] ?? service, '--index-url', `http://${service}/${route}/simple/`], { env: { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1' } });
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/**
 * One GET on a connection of its own, failing unless it answers 200 with a body of the given
 * sha256 (hex), if any. Its own connection: the upgrade's stopping pods run the previous release,
 * which closes an idle kept-alive connection at once when it stops, and a request crossing that
 * close fails in the client. This tree drains such connections first (app/drain.ts; the index-edit
 * roll below polls on kept-alive connections through this tree's pods stopping).
 */
function getWhole(url: string, digest?: string, headers: Record<string, string> = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers, agent: false, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        if (res.statusCode !== 200) return reject(new Error(`GET ${url}: ${res.statusCode} ${body.toString('utf8', 0, 300)}`));
        if (digest !== undefined && sha256(body) !== digest) return reject(new Error(`GET ${url}: a body of sha256 ${sha256(body)}, stored ${digest}`));
        resolve();
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to GET ${url} within 10 s`)));
    req.on('error', reject);
    req.end();
  });
}

/** One HTTPS GET on a new connection to `ip`, checking the certificate names `servername`: its status and the certificate's fingerprint. */
function httpsGet(ip: string, servername: string, ca: Buffer, path: string): Promise<{ status: number; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: ip, port: 443, path, servername, ca, agent: false, headers: { host: servername }, timeout: 10_000 }, (res) => {
      const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, fingerprint }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to GET ${path} within 10 s`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * A client making `requests` in turn, one at a time, until stopped: how many succeeded, and each
 * failure with its time. A request fails by throwing.
 */
function poll(requests: (() => Promise<void>)[]): { readonly ok: number; stop(): Promise<{ ok: number; failures: string[] }> } {
  let ok = 0;
  let polling = true;
  const failures: string[] = [];
  const loop = (async () => {
    for (let i = 0; polling; i++) {
      try {
        await requests[i % requests.length]!();
        ok++;
      } catch (err) {
        failures.push(`${new Date().toISOString()} ${String((err as Error).cause ?? (err as Error).message)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    get ok() {
      return ok;
    },
    stop: async () => {
      polling = false;
      await loop;
      return { ok, failures };
    },
  };
}

beforeAll(async () => {
  work = tempDir('velodex-e2e-');
  const image = join(work, 'velodex.oci.tar');
  currentVersion = imageVersion(REPO);
  // This tree's image and the previous release's (its own build, about a minute), side by side.
  [, previous] = await Promise.all([
    run(process.execPath, ['--import', 'tsx', join(REPO, 'hack', 'image', 'build.ts'), '--out', image, '--name', IMAGE], { timeoutMs: 300_000 }),
    buildPreviousRelease(PREVIOUS_RELEASE, 'docker.io/velodex/velodex:previous'),
  ]);
  project = await buildProject('e2e-demo', '1.0');
  upstreamProject = await buildProject('e2e-upstream', '2.0');
  node = await startKubeNode();
  await node.importImage(image);
  await node.importImage(previous.image);
  await node.importImage(join(TOOLS, 'images', 'minio.tar'));
  // The cached index's upstream: on the bridge, where the pods reach the host.
  upstreamDir = join(work, 'upstream');
  mkdirSync(upstreamDir);
  copyFileSync(upstreamProject.wheel, join(upstreamDir, upstreamProject.wheelFilename));
  upstream = await startPypiserver(upstreamDir, { host: NODE_IP });
}, 900_000);

afterAll(async () => {
  await dockerd?.stop();
  await upstream?.stop();
  await registryUpstream?.stop();
  await node?.stop();
});

describe('a platform team on a real cluster', () => {
  it(`installs the previous release (${PREVIOUS_RELEASE}) with its own helm chart and declares its team example as its docs/kubernetes.md does; twine, pip and crane work through a port-forward (the flow make kind-e2e runs on kind)`, async () => {
    flowWork = tempDir('velodex-e2e-flow-');
    // The release's own flow script: it installs that release's charts/ and docs/examples/.
    const flow = await run('bash', [join(previous.dir, 'hack', 'e2e-flow.sh')], {
      env: {
        ...node.env,
        PATH: `${join(TOOLS, 'bin')}:${join(TOOLS, 'venv', 'bin')}:${process.env.PATH ?? ''}`,
        VELODEX_IMAGE_TAG: 'previous',
        MINIO_IMAGE: 'docker.io/velodex/minio:e2e',
        // The example's PyPI cache pointed at the local upstream.
        PYPI_UPSTREAM: `${upstream.url}/simple/`,
        HELM_EXTRA: '--set operator.resyncSeconds=3',
        UPLOAD_TOKEN: TOKEN_ONE,
        WORK: flowWork,
      },
      timeoutMs: 600_000,
    }).catch(async (err: Error) => {
      const state = (await node.kubectl(['get', 'pods,pidx,events', '-A', '-o', 'wide'], { allowFailure: true })).stdout;
      throw new Error(`${err.message}\n${state}`);
    });
    expect(flow.stderr).toContain('== done: twine, pip and crane worked through velodex on this cluster');
  });

  it('has every index Ready, in kubectl wait, kubectl get and the Argo CD health check', async () => {
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
    acknowledged.wheels.push({ project: 'e2e-demo', version: '1.0', file: project.wheel });
    const dest = join(work, 'pip-1');
    await pip(['download', '--no-deps', '-d', dest, 'e2e-demo==1.0']);
    expect(readFileSync(join(dest, project.wheelFilename)).equals(readFileSync(project.wheel))).toBe(true);
    // Through the virtual index to the cached member and its upstream.
    await pip(['download', '--no-deps', '-d', dest, 'e2e-upstream==2.0']);
    expect(readFileSync(join(dest, upstreamProject.wheelFilename)).equals(readFileSync(upstreamProject.wheel))).toBe(true);
    // A second download is served from the bucket without the upstream. pypiserver logs a request
    // once its answer is over, and on a loaded machine its log once showed no line of the first
    // fetch at all within a minute (only the Simple page), though pip had the wheel: so no line is
    // waited for, only for the log to settle; then the second download adds no request for the
    // wheel. (Serving with the upstream gone is the UpstreamOffline case below.)
    const wheelFetches = () => upstream.count(`/packages/${upstreamProject.wheelFilename}`);
    await new Promise((r) => setTimeout(r, 1500));
    const fetched = wheelFetches();
    await pip(['download', '--no-deps', '-d', join(work, 'pip-1b'), 'e2e-upstream==2.0']);
    await new Promise((r) => setTimeout(r, 1500));
    expect(wheelFetches()).toBe(fetched);

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
    acknowledged.images.push({ ref: 'team/images/app:v1', digest: img.manifest.descriptor.digest });
  });

  it(`upgrades from the previous release to this tree (CRDs applied, then helm upgrade) while a client polls every stored object: no failed request, the new image and version in /+status and kubectl get, everything read back whole by pip and crane`, async () => {
    expect(currentVersion, 'the two builds must report different versions for the upgrade to show').not.toBe(previous.version);
    // What the previous release stored: this suite's uploads and pushes, and the install flow's.
    const flowWheel = readdirSync(join(flowWork, 'dist')).find((f) => f.endsWith('.whl'));
    expect(flowWheel).toBeDefined();
    acknowledged.wheels.push({ project: 'flow-demo', version: '1.0', file: join(flowWork, 'dist', flowWheel!) });
    const craneEnv = { DOCKER_CONFIG: join(work, 'docker-upgrade'), HOME: work };
    const flowDigest = (await run(tool('crane'), ['digest', `${service}/team/images/flow:v1`, '--insecure'], { env: craneEnv })).stdout.trim();
    acknowledged.images.push({ ref: 'team/images/flow:v1', digest: flowDigest });

    // The objects the poller fetches: each wheel's file (its URL from the JSON Simple page), each
    // image's manifest by tag and every blob it names, with the digest each must have.
    const targets: { url: string; sha256?: string; headers?: Record<string, string> }[] = [];
    for (const w of acknowledged.wheels) {
      const page = `http://${service}/team/hosted/simple/${w.project}/`;
      const files = ((await (await fetch(page, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } })).json()) as { files: { filename: string; url: string }[] }).files;
      const file = files.find((f) => f.filename === basename(w.file));
      expect(file, `${basename(w.file)} on ${page}`).toBeDefined();
      targets.push({ url: page }, { url: new URL(file!.url, page).href, sha256: sha256(readFileSync(w.file)) });
    }
    const accept = 'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json';
    for (const image of acknowledged.images) {
      const [repo, tag] = image.ref.split(':') as [string, string];
      const manifestUrl = `http://${service}/v2/${repo}/manifests/${tag}`;
      const manifest = (await (await fetch(manifestUrl, { headers: { accept } })).json()) as { config: { digest: string }; layers: { digest: string }[] };
      targets.push({ url: manifestUrl, sha256: image.digest.replace('sha256:', ''), headers: { accept } });
      for (const blob of [manifest.config, ...manifest.layers]) targets.push({ url: `http://${service}/v2/${repo}/blobs/${blob.digest}`, sha256: blob.digest.replace('sha256:', '') });
    }
    expect(targets.length).toBeGreaterThanOrEqual(10);

    // Before: the previous release's pods, and they say so.
    const versionColumn = async () => {
      const table = (await k(['get', 'packageregistry', 'default', '-n', NS])).stdout.split('\n');
      const at = table[0]!.indexOf('VERSION');
      return table[1]?.slice(at).split(/\s+/)[0];
    };
    const statusVersion = async () => ((await (await fetch(`http://${service}/+status`)).json()) as { version: string }).version;
    expect(await until('the previous version in the VERSION column', async () => ((await versionColumn()) === previous.version ? true : undefined))).toBe(true);
    expect(await statusVersion()).toBe(previous.version);
    const podImages = async (namespace: string, selector: string) => (await k(['get', 'pods', '-n', namespace, '-l', selector, '-o', 'jsonpath={.items[*].spec.containers[0].image}'])).stdout.trim().split(/\s+/);
    await untilOnlyNewPods();
    expect(await podImages(NS, 'app.kubernetes.io/instance=default')).toEqual([previous.name, previous.name]);

    const poller = poll(targets.map((t) => () => getWhole(t.url, t.sha256, t.headers)));
    const started = Date.now();
    // docs/kubernetes.md, Upgrading: the CRDs first (helm upgrade leaves a chart's crds/ alone), then the release.
    // The slash as in the docs: the chart's crds/ is a link to the repository's, which kubectl reads as a folder only so.
    await k(['apply', '--server-side', '--force-conflicts', '-f', `${join(REPO, 'charts', 'velodex', 'crds')}/`]);
    const helm = await run(tool('helm'), ['upgrade', 'velodex', join(REPO, 'charts', 'velodex'), '-n', 'velodex-system', '--reset-then-reuse-values', '--set', 'image.tag=e2e'], { env: node.env, timeoutMs: 120_000 });
    expect(helm.stdout).toContain('has been upgraded');
    await k(['rollout', 'status', 'deployment/velodex-operator', '-n', 'velodex-system', '--timeout=180s']);
    // The new operator renders the registry with its own image: the pods roll to it.
    await until("the registry's template on this tree's image", async () => ((await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.spec.template.spec.containers[0].image}'])).stdout === IMAGE ? true : undefined));
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await untilOnlyNewPods();
    expect(await podImages(NS, 'app.kubernetes.io/instance=default')).toEqual([IMAGE, IMAGE]);
    // The old operator's pod may still be on its way out after the rollout: until it is gone.
    expect(await until("the operator's pods on this tree's image", async () => ((await podImages('velodex-system', 'app.kubernetes.io/component=operator')).every((i) => i === IMAGE) ? true : undefined))).toBe(true);
    // The client polls on a while on the new pods alone: every object once more at least.
    const okAtRoll = poller.ok;
    await until('every object served by the new pods', async () => (poller.ok >= okAtRoll + targets.length ? true : undefined), 60_000);
    const polled = await poller.stop();
    console.log(`upgrade ${PREVIOUS_RELEASE} (${previous.version}) -> ${currentVersion}: ${polled.ok + polled.failures.length} requests polled over ${Math.round((Date.now() - started) / 1000)} s, ${polled.failures.length} failed`);
    expect(polled.failures).toEqual([]);
    expect(polled.ok).toBeGreaterThan(2 * targets.length);

    // The new version, in /+status (whichever pod answers) and in the VERSION column.
    for (let i = 0; i < 6; i++) expect(await statusVersion()).toBe(currentVersion);
    expect(await until('the new version in the VERSION column', async () => ((await versionColumn()) === currentVersion ? true : undefined))).toBe(true);

    // Everything stored before, read back whole by the clients themselves.
    for (const [i, w] of acknowledged.wheels.entries()) {
      const dest = join(work, `pip-upgrade-${i}`);
      await pip(['download', '--no-deps', '--no-cache-dir', '-d', dest, `${w.project}==${w.version}`], 'team/hosted');
      expect(readFileSync(join(dest, basename(w.file))).equals(readFileSync(w.file))).toBe(true);
    }
    for (const [i, image] of acknowledged.images.entries()) {
      const ref = `${service}/${image.ref}`;
      expect((await run(tool('crane'), ['digest', ref, '--insecure'], { env: craneEnv })).stdout.trim()).toBe(image.digest);
      // crane checks every layer's digest as it writes the layout.
      await run(tool('crane'), ['pull', '--format', 'oci', ref, join(work, `pulled-upgrade-${i}`), '--insecure'], { env: craneEnv });
    }
  });

  it("lets a pod push a wheel and an image with its ServiceAccount's projected token and no Secret; a pod of another ServiceAccount is refused (403); a private index is read from a pod with a token and not without", async () => {
    for (const account of ['publisher', 'outsider', 'reader']) await k(['create', 'serviceaccount', account, '-n', NS]);
    const access = JSON.stringify({ spec: { access: { serviceAccounts: [{ name: 'publisher', scopes: ['upload'] }] } } });
    for (const ix of ['hosted', 'images']) await k(['patch', 'pidx', ix, '-n', NS, '--type=merge', '-p', access]);
    // A private index (read = "token"), in the same roll: the publisher uploads to it, the reader only reads.
    await k(
      ['apply', '-f', '-'],
      `apiVersion: velodex.dev/v1alpha1\nkind: PackageIndex\nmetadata:\n  name: vault\n  namespace: ${NS}\nspec:\n  route: team/vault\n  ecosystem: python\n  role: hosted\n  read: token\n  access: { serviceAccounts: [{ name: publisher, scopes: [upload] }, { name: reader, scopes: [read] }] }\n`,
    );
    await until('the rules in the ConfigMap', async () => {
      const toml = (await k(['get', 'configmap', 'default-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout;
      return (toml.match(/\[\[index\.service_account\]\]/g) ?? []).length === 4 && toml.includes('[kubernetes]') && toml.includes('read = "token"') ? true : undefined;
    });
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await untilOnlyNewPods();
    // The registry pods run as their own ServiceAccount, which may read the cluster's issuer.
    expect((await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.spec.template.spec.serviceAccountName} {.spec.template.spec.automountServiceAccountToken}'])).stdout).toBe('velodex-default true');
    expect((await k(['auth', 'can-i', 'get', '/openid/v1/jwks', `--as=system:serviceaccount:${NS}:velodex-default`])).stdout.trim()).toBe('yes');

    const wheel = await buildProject('e2e-sa', '1.0');
    const clients = join(work, 'sa-clients');
    mkdirSync(clients, { recursive: true });
    copyFileSync(wheel.wheel, join(clients, wheel.wheelFilename));
    const layout = writeLayout(join(clients, 'layout'), [{ tag: 'v1', item: buildImage({ seed: 'e2e-sa' }) }]);
    const tools = realpathSync(TOOLS);
    // The venv's interpreter, wherever this machine installed it (its prefix holds the standard library).
    const python = dirname(dirname(realpathSync(join(tools, 'venv', 'bin', 'python3'))));
    // No image here has Python or crane: the client pods run the host's own twine (its venv) and
    // crane, with the host's /usr mounted read-only; the token is the pod's own, projected for velodex.
    const host = service.split(':')[0] ?? service;
    const pipIn = (dest: string, credentials: string) =>
      `pip download --no-deps --no-cache-dir -d /tmp/${dest} --trusted-host ${host} --index-url http://${credentials}${service}/team/vault/simple/ e2e-sa==1.0; echo "pip ${dest} exit $?"`;
    const scripts: Record<string, string[]> = {
      push: [
        `twine upload --disable-progress-bar --non-interactive --repository-url http://${service}/team/hosted/ -u __token__ -p "$TOKEN" ${clients}/${wheel.wheelFilename}; echo "twine exit $?"`,
        `twine upload --disable-progress-bar --non-interactive --repository-url http://${service}/team/vault/ -u __token__ -p "$TOKEN" ${clients}/${wheel.wheelFilename}; echo "twine vault exit $?"`,
        `printf %s "$TOKEN" | crane auth login ${service} -u __token__ --password-stdin --insecure`,
        'crane push LAYOUT IMAGE --insecure; echo "crane exit $?"',
      ],
      read: [pipIn('anonymous', ''), pipIn('token', '__token__:$TOKEN@')],
    };
    const clientPod = (name: string, account: string, what: 'push' | 'read') => {
      const script = ['TOKEN="$(cat /var/run/secrets/velodex/token)"', ...scripts[what]!]
        .join('\n')
        .replace('LAYOUT', layout)
        .replace('IMAGE', `${service}/team/images/${name}:v1`);
      const hostPath = (path: string) => ({ name: path.replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, ''), path });
      const mounts = ['/usr', python, tools, clients].map(hostPath);
      return {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: NS },
        spec: {
          serviceAccountName: account,
          automountServiceAccountToken: false,
          restartPolicy: 'Never',
          securityContext: { runAsUser: 0 },
          containers: [
            {
              name: 'client',
              image: 'docker.io/velodex/velodex:e2e',
              imagePullPolicy: 'Never',
              command: ['/usr/bin/sh', '-c', script],
              env: [
                { name: 'PATH', value: `${tools}/venv/bin:${tools}/bin:/usr/bin` },
                { name: 'HOME', value: '/tmp' },
                { name: 'PIP_CONFIG_FILE', value: '/dev/null' },
                { name: 'PIP_DISABLE_PIP_VERSION_CHECK', value: '1' },
                { name: 'DOCKER_CONFIG', value: '/tmp/docker' },
                { name: 'NO_COLOR', value: '1' },
                { name: 'COLUMNS', value: '200' },
              ],
              volumeMounts: [
                ...mounts.map((m) => ({ name: m.name, mountPath: m.path, readOnly: true })),
                { name: 'velodex-token', mountPath: '/var/run/secrets/velodex', readOnly: true },
              ],
            },
          ],
          volumes: [
            ...mounts.map((m) => ({ name: m.name, hostPath: { path: m.path } })),
            { name: 'velodex-token', projected: { sources: [{ serviceAccountToken: { audience: 'velodex', expirationSeconds: 600, path: 'token' } }] } },
          ],
        },
      };
    };
    const runPod = async (name: string, account: string, what: 'push' | 'read' = 'push') => {
      await k(['apply', '-f', '-'], JSON.stringify(clientPod(name, account, what)));
      await until(`pod ${name} to finish`, async () => {
        const phase = (await k(['get', 'pod', name, '-n', NS, '-o', 'jsonpath={.status.phase}'])).stdout;
        return phase === 'Succeeded' || phase === 'Failed' ? phase : undefined;
      });
      const pod = JSON.parse((await k(['get', 'pod', name, '-n', NS, '-o', 'json'])).stdout) as { spec: { volumes: Array<Record<string, unknown>> } };
      // No Secret anywhere in the pod: only host folders and the projected token.
      expect(pod.spec.volumes.some((v) => 'secret' in v)).toBe(false);
      return (await k(['logs', name, '-n', NS])).stdout;
    };

    const published = await runPod('sa-publisher', 'publisher');
    expect(published, published).toContain('twine exit 0');
    expect(published, published).toContain('crane exit 0');
    const dest = join(work, 'pip-sa');
    await pip(['download', '--no-deps', '-d', dest, 'e2e-sa==1.0'], 'team/hosted');
    expect(readFileSync(join(dest, wheel.wheelFilename)).equals(readFileSync(wheel.wheel))).toBe(true);
    const recent = ((await (await fetch(`http://${service}/+status?details=admin`)).json()) as { recent_uploads: Array<{ filename: string; by?: string }> }).recent_uploads;
    expect(recent.find((u) => u.filename === wheel.wheelFilename)?.by).toBe(`serviceaccount:${NS}/publisher`);

    const refused = await runPod('sa-outsider', 'outsider');
    expect(refused, refused).toMatch(/403 Forbidden[\s\S]*the service account "team\/outsider" may not upload \(its scopes: none on this index\)/);
    expect(refused, refused).toMatch(/DENIED|denied|UNAUTHORIZED|unauthorized/);
    expect(refused, refused).not.toContain('crane exit 0');

    // The private index: the publisher's upload landed; a pod reads it with its token, not without.
    expect(published, published).toContain('twine vault exit 0');
    const read = await runPod('sa-reader', 'reader', 'read');
    expect(read, read).toMatch(/pip anonymous exit [1-9]/);
    expect(read, read).not.toContain('Saved /tmp/anonymous');
    expect(read, read).toContain('pip token exit 0');
    expect(read, read).toContain(`Saved /tmp/token/${wheel.wheelFilename}`);
    // A pod whose ServiceAccount has no rule on it does not read it either.
    const stranger = await runPod('sa-stranger', 'outsider', 'read');
    expect(stranger, stranger).toMatch(/pip token exit [1-9]/);
    expect(stranger, stranger).not.toContain('Saved');
    await k(['delete', 'pod', 'sa-publisher', 'sa-outsider', 'sa-reader', 'sa-stranger', '-n', NS, '--wait=false']);
  });

  // Needs the registry side of issue 25: pods whose /+status counts stored bytes (`stored`).
  it('shows what each index stores in the SIZE column once the pods have counted the pushes, and the registry total', async () => {
    const sizeOf = async (kind: string, name: string) => (await k(['get', kind, name, '-n', NS, '-o', 'jsonpath={.status.size}'])).stdout.trim() || undefined;
    for (const name of ['hosted', 'images']) expect(await until(`the size of ${name}`, () => sizeOf('pidx', name), 120_000)).toMatch(/^\d+(\.\d)? (B|KiB|MiB|GiB)$/);
    const stored = JSON.parse((await k(['get', 'pidx', 'images', '-n', NS, '-o', 'jsonpath={.status.storedBytes}'])).stdout) as number;
    // At least the image's config and layer went in.
    expect(stored).toBeGreaterThan(0);
    const table = (await k(['get', 'pidx', '-n', NS])).stdout;
    expect(table.split('\n')[0]).toMatch(/^NAME\s+ROUTE\s+ECOSYSTEM\s+ROLE\s+REGISTRY\s+READY\s+UPSTREAM\s+SIZE\s+AGE$/);
    expect(table).toMatch(/^images\s+team\/images\s+oci\s+hosted\s+default\s+True\s+\d+(\.\d)? (B|KiB|MiB|GiB)\s+\d+/m);
    expect(await until('the registry size', () => sizeOf('packageregistry', 'default'), 120_000)).toMatch(/^\d+(\.\d)? (B|KiB|MiB|GiB)$/);
    expect((await k(['get', 'packageregistry', '-n', NS])).stdout.split('\n')[0]).toMatch(/\bREADY\s+SIZE\s+VERSION\s+AGE$/);
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
          const body = await res.text();
          if (res.status === 200) ok++;
          else failures.push(`status ${res.status} at ${new Date().toISOString()}: ${body.slice(0, 300)}`);
        } catch (err) {
          failures.push(String((err as Error).cause ?? err));
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const podNames = async () => (await k(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/instance=default', '-o', 'jsonpath={.items[*].metadata.name}'])).stdout.trim().split(/\s+/);
    const checksum = () => k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.spec.template.metadata.annotations.velodex\\.dev/config-checksum}']).then((r) => r.stdout);
    const [podsBefore, checksumBefore] = [await podNames(), await checksum()];
    const before = (await k(['get', 'configmap', 'default-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout;
    await k(['patch', 'pidx', 'pypi', '-n', NS, '--type=merge', '-p', '{"spec":{"upstreamConcurrency":5}}']);
    await until('the edit in the ConfigMap', async () => {
      const now = (await k(['get', 'configmap', 'default-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout;
      return now !== before && now.includes('upstream_concurrency = 5') ? true : undefined;
    });
    // The edit reaches the pod template (a new checksum), which is what rolls the pods.
    await until('a new pod template', async () => ((await checksum()) !== checksumBefore ? true : undefined));
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await untilOnlyNewPods();
    // Every pod serving now was started for the edit: none of those that served before is left.
    const podsAfter = await podNames();
    expect(podsAfter).toHaveLength(2);
    expect(podsAfter.filter((p) => podsBefore.includes(p))).toEqual([]);
    // The client keeps polling a moment on the new pods alone.
    const okAtRoll = ok;
    await until('requests served by the new pods', async () => (ok >= okAtRoll + 10 ? true : undefined), 60_000);
    polling = false;
    await poller;
    expect(failures).toEqual([]);
    expect(ok).toBeGreaterThan(20);
  });

  it('rolls the pods when the upload token rotates: the old token is refused, the new one accepted', async () => {
    const before = (await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.spec.template.metadata.annotations.velodex\\.dev/config-checksum}'])).stdout;
    const secret = (await k(['create', 'secret', 'generic', 'upload-tokens', '-n', NS, `--from-literal=hosted=${TOKEN_TWO}`, '--dry-run=client', '-o', 'yaml'])).stdout;
    // The new version keeps the label that lets velodex use it.
    const labelled = (await k(['label', '--local', '-f', '-', 'velodex.dev/allow-reference=true', '-o', 'yaml'], secret)).stdout;
    await k(['apply', '-f', '-'], labelled);
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
    acknowledged.wheels.push({ project: 'e2e-rotated', version: '1.0', file: other.wheel });
  });

  it('says in kubectl get why an index is not served; the older index keeps its route; an invalid spec never gets in', async () => {
    const index = (name: string, spec: string) => `apiVersion: velodex.dev/v1alpha1\nkind: PackageIndex\nmetadata:\n  name: ${name}\n  namespace: ${NS}\nspec:\n${spec}`;
    const invalid = await node.kubectl(['apply', '-f', '-'], { input: index('broken', '  route: team/broken\n  ecosystem: python\n  role: cached\n'), allowFailure: true });
    expect(invalid.code).not.toBe(0);
    expect(invalid.stderr).toContain('a cached index needs spec.upstream');
    const checksum = (await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.spec.template.metadata.annotations.velodex\\.dev/config-checksum}'])).stdout;
    await k(
      ['apply', '-f', '-'],
      [
        index('clash', '  route: team/hosted\n  ecosystem: python\n  role: hosted\n'),
        index('nosecret', '  route: team/nosecret\n  ecosystem: python\n  role: hosted\n  uploadTokenSecretRef: { name: absent, key: token }\n'),
        index('elsewhere', '  registry: other\n  route: team/elsewhere\n  ecosystem: python\n  role: hosted\n'),
      ].join('---\n'),
    );
    const wide = await until('the three reasons in kubectl get', async () => {
      const out = (await k(['get', 'pidx', 'clash', 'nosecret', 'elsewhere', '-n', NS, '-o', 'wide'])).stdout;
      return ['RouteConflict', 'SecretNotFound', 'RegistryNotFound'].every((r) => out.includes(r)) ? out : undefined;
    });
    expect(wide).toMatch(/clash\s+team\/hosted\s+python\s+hosted\s+default\s+False\s+.*RouteConflict\s+route "team\/hosted" is already served by the older PackageIndex "hosted"/);
    expect(wide).toMatch(/nosecret\s+team\/nosecret\s+python\s+hosted\s+default\s+False\s+.*SecretNotFound\s+.*Secret "absent" does not exist/);
    expect(wide).toMatch(/elsewhere\s+team\/elsewhere\s+python\s+hosted\s+other\s+False\s+.*RegistryNotFound\s+PackageRegistry "other" does not exist/);
    // The older index still serves its route, from pods that never rolled for the refused ones.
    await pip(['download', '--no-deps', '-d', join(work, 'pip-clash'), 'e2e-demo==1.0'], 'team/hosted');
    expect((await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.spec.template.metadata.annotations.velodex\\.dev/config-checksum}'])).stdout).toBe(checksum);
    await k(['delete', 'pidx', 'clash', 'nosecret', 'elsewhere', '-n', NS]);
  });

  it('runs two operators, one leading; the leader killed as soon as it wrote the new config, the other finishes the work and nothing is written twice', async () => {
    const helm = await run(tool('helm'), ['upgrade', 'velodex', join(REPO, 'charts', 'velodex'), '-n', 'velodex-system', '--reuse-values', '--set', 'operator.replicas=2'], { env: node.env, timeoutMs: 120_000 });
    expect(helm.stdout).toContain('has been upgraded');
    await k(['rollout', 'status', 'deployment/velodex-operator', '-n', 'velodex-system', '--timeout=180s']);
    const holder = async () => (await k(['get', 'lease', 'velodex-operator', '-n', 'velodex-system', '-o', 'jsonpath={.spec.holderIdentity}'])).stdout.trim();
    const operatorPods = async () => (await k(['get', 'pods', '-n', 'velodex-system', '-l', 'app.kubernetes.io/component=operator', '-o', 'jsonpath={.items[*].metadata.name}'])).stdout.trim().split(/\s+/);
    const leader = await until('a leader among the two operators', async () => {
      const [h, pods] = [await holder(), await operatorPods()];
      return pods.length === 2 && pods.includes(h) ? h : undefined;
    });
    const generation = async () => Number((await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.metadata.generation}'])).stdout);
    const before = await generation();
    // A new index changes the config: one roll. The leader is killed while it works on it.
    await k(
      ['apply', '-f', '-'],
      `apiVersion: velodex.dev/v1alpha1\nkind: PackageIndex\nmetadata:\n  name: late\n  namespace: ${NS}\nspec:\n  route: team/late\n  ecosystem: oci\n  role: hosted\n  quotaBytes: 1Gi\n  retention: { untaggedAfter: 14d, keepTags: [{ match: "v*", newest: 3 }] }\n`,
    );
    // Killed the moment its work shows: the ConfigMap names the new index (the Deployment may or
    // may not have its new template yet).
    await until('the leader at work on the new index', async () => {
      const toml = (await k(['get', 'configmap', 'default-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout;
      return toml.includes('"team/late"') ? true : undefined;
    });
    await k(['delete', 'pod', leader, '-n', 'velodex-system', '--grace-period=0', '--force']);
    await k(['wait', '--for=condition=Ready', 'pidx/late', '-n', NS, '--timeout=240s']);
    const next = await holder();
    expect(next).not.toBe(leader);
    expect(await operatorPods()).toContain(next);
    // However far the killed leader got, the new one applied the same objects: one new template.
    expect(await generation()).toBe(before + 1);
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await untilOnlyNewPods();
  });

  it('is Degraded with UpstreamOffline while the upstream is down, still serving what it cached, and recovers', async () => {
    const miss = (n: number) => fetch(`http://${service}/team/pypi/simple/e2e-probe-${n}/`, { signal: AbortSignal.timeout(60_000) }).then(async (r) => (await r.arrayBuffer(), r.status));
    const degraded = async () => JSON.parse((await k(['get', 'pidx', 'pypi', '-n', NS, '-o', 'jsonpath={.status.conditions[?(@.type=="Degraded")]}'])).stdout || '{}') as { status?: string; reason?: string };
    expect(await degraded()).toMatchObject({ status: 'False' });
    expect((await k(['get', 'pidx', 'pypi', '-n', NS])).stdout).toMatch(/pypi\s+team\/pypi\s+python\s+cached\s+default\s+True\s+online/);
    const port = upstream.port;
    await upstream.stop();
    let n = 0;
    // A miss is what makes a pod try the upstream (the Service picks the pod).
    await until('UpstreamOffline', async () => {
      await miss(n++);
      return (await degraded()).reason === 'UpstreamOffline' ? true : undefined;
    });
    expect(await degraded()).toMatchObject({ status: 'True', reason: 'UpstreamOffline' });
    expect((await k(['get', 'pidx', 'pypi', '-n', NS])).stdout).toMatch(/pypi\s+team\/pypi\s+python\s+cached\s+default\s+True\s+offline/);
    expect((await argoHealth('PackageIndex', JSON.parse((await k(['get', 'pidx', 'pypi', '-n', NS, '-o', 'json'])).stdout))).status).toBe('Degraded');
    // What it cached is still served.
    const dest = join(work, 'pip-offline');
    // Failed once in CI (the metadata sibling answered 502): the pods' own account goes with the error.
    await pip(['download', '--no-deps', '-d', dest, 'e2e-upstream==2.0'], 'team/pypi').catch(async (err: Error) => {
      const pods = (await k(['get', 'pods', '-A', '-o', 'wide'])).stdout;
      const logs = (await node.kubectl(['logs', '-n', NS, '-l', 'app.kubernetes.io/instance=default', '--tail=80', '--prefix'], { allowFailure: true })).stdout;
      throw new Error(`${err.message}\n${pods}\n${logs}`);
    });
    expect(readFileSync(join(dest, upstreamProject.wheelFilename)).equals(readFileSync(upstreamProject.wheel))).toBe(true);

    upstream = await startPypiserver(upstreamDir, { host: NODE_IP, port });
    await until('the upstream online again', async () => {
      await miss(n++);
      return (await degraded()).status === 'False' ? true : undefined;
    });
    expect((await k(['get', 'pidx', 'pypi', '-n', NS])).stdout).toMatch(/pypi\s+team\/pypi\s+python\s+cached\s+default\s+True\s+online/);
  });

  it("pulls a pod's image through a cached OCI index with the node containerd's hosts.toml from /+api, and still after the upstream is gone", async () => {
    const upstreamRegistry = await startDistribution(tempDir('velodex-e2e-registry-'), null, { host: NODE_IP });
    registryUpstream = upstreamRegistry;
    const image = `${upstreamRegistry.host}/library/pause:e2e`;
    const craneEnv = { HOME: work, DOCKER_CONFIG: join(work, 'docker-upstream') };
    const crane = async (args: string[]) => (await run(tool('crane'), [...args, '--insecure'], { env: craneEnv })).stdout.trim();
    // A runnable image: the cluster's own pause binary (its archive is one crane pushes as it is),
    // plus a layer of its own, so the node holds neither that layer nor the config yet.
    await crane(['push', join(TOOLS, 'images', 'pause.tar'), image]);
    const marker = join(work, 'marker');
    mkdirSync(marker);
    writeFileSync(join(marker, 'e2e-marker'), `${Date.now()}-${Math.random()}`);
    await run('tar', ['-cf', join(work, 'marker.tar'), '-C', marker, 'e2e-marker']);
    await crane(['append', '-b', image, '-f', join(work, 'marker.tar'), '-t', image]);
    const manifest = JSON.parse(await crane(['manifest', image])) as { config: { digest: string }; layers: { digest: string }[] };
    const digest = await crane(['digest', image]);
    await k(
      ['apply', '-f', '-'],
      `apiVersion: velodex.dev/v1alpha1\nkind: PackageIndex\nmetadata:\n  name: mirror\n  namespace: ${NS}\nspec:\n  route: team/mirror\n  ecosystem: oci\n  role: cached\n  upstream: ${upstreamRegistry.url}\n  maxBytes: 2Gi\n  evictUnusedAfter: 30d\n`,
    );
    await k(['wait', '--for=condition=Ready', 'pidx/mirror', '-n', NS, '--timeout=240s']);
    // Ready: every ready pod serves it; pods of the previous config may still answer while they stop.
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await untilOnlyNewPods();

    // The budget, the quota and the retention rules set in the PackageIndexes reach the pods.
    const status = (await (await fetch(`http://${service}/+status`)).json()) as { indexes: Array<Record<string, unknown> & { name: string }> };
    expect(status.indexes.find((ix) => ix.name === 'mirror')).toMatchObject({ max_bytes: 2 * 2 ** 30, evict_unused_after_secs: 30 * 86_400 });
    expect(status.indexes.find((ix) => ix.name === 'late')).toMatchObject({
      quota_bytes: 2 ** 30,
      retention: { untagged_after_secs: 14 * 86_400, keep_tags: [{ match: 'v*', newest: 3 }] },
    });

    // The node's containerd is configured the way /+api says: the upstream's host, mirrored.
    const apiRes = await fetch(`http://${service}/team/mirror/+api`);
    expect(apiRes.status).toBe(200);
    const api = (await apiRes.json()) as {
      indexes: Array<{ name: string; client_configuration?: { containerd?: { path: string; text: string } } }>;
    };
    const hosts = api.indexes.find((ix) => ix.name === 'mirror')?.client_configuration?.containerd;
    expect(hosts?.path).toBe(`/etc/containerd/certs.d/${upstreamRegistry.host}/hosts.toml`);
    mkdirSync(join(node.certsDir, upstreamRegistry.host), { recursive: true });
    writeFileSync(join(node.certsDir, upstreamRegistry.host, 'hosts.toml'), hosts?.text ?? '');

    const pod = (name: string) =>
      `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\n  namespace: ${NS}\nspec:\n  containers:\n    - name: main\n      image: ${image}\n      imagePullPolicy: Always\n`;
    await k(['apply', '-f', '-'], pod('pulled-through'));
    await k(['wait', '--for=condition=Ready', 'pod/pulled-through', '-n', NS, '--timeout=180s']);
    // The upstream gone: what the node had to fetch (the manifest, the config, the new layer) is in
    // velodex's cache, so the node's pull went through velodex (nothing else could have put it
    // there), and the next pull resolves there.
    await upstreamRegistry.stop();
    const cached = `${service}/team/mirror/library/pause`;
    expect(await crane(['digest', `${cached}:e2e`])).toBe(digest);
    for (const blob of [manifest.config.digest, manifest.layers.at(-1)?.digest ?? '']) await crane(['blob', `${cached}@${blob}`]);
    await k(['apply', '-f', '-'], pod('pulled-from-cache'));
    await k(['wait', '--for=condition=Ready', 'pod/pulled-from-cache', '-n', NS, '--timeout=180s']);
    await k(['delete', 'pod', 'pulled-through', 'pulled-from-cache', '-n', NS, '--wait=false']);
  });

  it("is the node mirror of two registries through one endpoint (containerd's ns): pods of both start, and again with both registries gone; a third registry's pod comes from that registry itself", async () => {
    const registries = await Promise.all(['a', 'b', 'c'].map(() => startDistribution(tempDir('velodex-e2e-node-mirror-'), null, { host: NODE_IP })));
    try {
      const craneEnv = { HOME: work, DOCKER_CONFIG: join(work, 'docker-node-mirror') };
      const crane = async (args: string[]) => (await run(tool('crane'), [...args, '--insecure'], { env: craneEnv })).stdout.trim();
      // A runnable image in each registry, with a layer of its own so the node holds none of it yet.
      const images: string[] = [];
      for (const [i, registry] of registries.entries()) {
        const image = `${registry.host}/library/pause:mirror`;
        await crane(['push', join(TOOLS, 'images', 'pause.tar'), image]);
        const dir = join(work, `node-mirror-marker-${i}`);
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, 'node-mirror-marker'), `${i}-${Date.now()}-${Math.random()}`);
        await run('tar', ['-cf', `${dir}.tar`, '-C', dir, 'node-mirror-marker']);
        await crane(['append', '-b', image, '-f', `${dir}.tar`, '-t', image]);
        images.push(image);
      }
      const [a, b, c] = registries as [Distribution, Distribution, Distribution];
      const index = (name: string, upstream: string) =>
        `apiVersion: velodex.dev/v1alpha1\nkind: PackageIndex\nmetadata:\n  name: ${name}\n  namespace: ${NS}\nspec:\n  route: team/${name}\n  ecosystem: oci\n  role: cached\n  upstream: ${upstream}\n`;
      await k(['apply', '-f', '-'], `${index('node-a', a.url)}---\n${index('node-b', b.url)}`);
      const mirror = { spec: { nodeMirror: { registries: [{ registry: a.host, index: 'node-a' }, { registry: b.host, index: 'node-b' }] } } };
      await k(['patch', 'packageregistry', 'default', '-n', NS, '--type=merge', '-p', JSON.stringify(mirror)]);
      await k(['wait', '--for=condition=NodeMirror', 'packageregistry/default', '-n', NS, '--timeout=240s']);
      await k(['wait', '--for=condition=Ready', 'pidx/node-a', 'pidx/node-b', '-n', NS, '--timeout=240s']);
      await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
      await untilOnlyNewPods();

      // Each node file as /+api gives it; the third registry's file sends its pulls to velodex too
      // (as a node that routes every registry there would), with the registry itself as fallback.
      const api = (await (await fetch(`http://${service}/+api`)).json()) as { node_mirror?: { registries: Record<string, { client_configuration?: { containerd?: { path: string; text: string } } }> } };
      for (const registry of [a, b]) {
        const hosts = api.node_mirror?.registries[registry.host]?.client_configuration?.containerd;
        expect(hosts?.path).toBe(`/etc/containerd/certs.d/${registry.host}/hosts.toml`);
        mkdirSync(join(node.certsDir, registry.host), { recursive: true });
        writeFileSync(join(node.certsDir, registry.host, 'hosts.toml'), hosts?.text ?? '');
      }
      mkdirSync(join(node.certsDir, c.host), { recursive: true });
      writeFileSync(join(node.certsDir, c.host, 'hosts.toml'), `server = "${c.url}"\n\n[host."http://${service}"]\n  capabilities = ["pull", "resolve"]\n`);

      const pod = (name: string, image: string) =>
        `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\n  namespace: ${NS}\nspec:\n  containers:\n    - name: main\n      image: ${image}\n      imagePullPolicy: Always\n`;
      const started = async (pods: [string, string][]) => {
        await k(['apply', '-f', '-'], pods.map(([name, image]) => pod(name, image)).join('---\n'));
        await k(['wait', '--for=condition=Ready', ...pods.map(([name]) => `pod/${name}`), '-n', NS, '--timeout=180s']);
      };
      await started([['mirrored-a', images[0]!], ['mirrored-b', images[1]!], ['not-mirrored-c', images[2]!]]);
      // Velodex answered the third registry's requests 404, naming it, so containerd went to it.
      const refused = await fetch(`http://${service}/v2/library/pause/manifests/mirror?ns=${encodeURIComponent(c.host)}`);
      expect(refused.status).toBe(404);
      expect(await refused.text()).toContain(c.host);
      // The two mirrored registries gone, their images still start: the node's pulls went through
      // velodex's caches of them (nothing else could have put them there).
      await a.stop();
      await b.stop();
      await started([['cached-a', images[0]!], ['cached-b', images[1]!]]);
      await k(['delete', 'pod', 'mirrored-a', 'mirrored-b', 'not-mirrored-c', 'cached-a', 'cached-b', '-n', NS, '--wait=false']);
      await k(['patch', 'packageregistry', 'default', '-n', NS, '--type=json', '-p', '[{"op":"remove","path":"/spec/nodeMirror"}]']);
      await k(['delete', 'pidx/node-a', 'pidx/node-b', '-n', NS]);
    } finally {
      for (const registry of registries) await registry.stop();
    }
  });

  it("keeps copies in every pod with spec.storage.peerCache: each pod's /+status names every process of every pod; a tag moved or a wheel uploaded through one pod is what every other pod serves on its next request, and warm manifest GETs ask MinIO (almost) nothing", async () => {
    // The wheels uploaded below, built while the pods roll.
    const wheels = Promise.all(['1.0', '1.1'].map((version) => buildProject('e2e-peer', version)));
    const toml = async () => (await k(['get', 'configmap', 'default-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout;
    // The node-mirror step's cleanup reached the config first, so that this roll is the last one.
    await until('the node mirror gone from the config', async () => (!(await toml()).includes('"team/node-a"') ? true : undefined));
    await k(['patch', 'packageregistry', 'default', '-n', NS, '--type=merge', '-p', '{"spec":{"storage":{"peerCache":true}}}']);
    await until('peer_cache in the config', async () => ((await toml()).includes('peer_cache = true') ? true : undefined));
    await until('the pod template with its own IP as VELODEX_PEER_HOST', async () => ((await k(['get', 'deployment', 'default', '-n', NS, '-o', 'jsonpath={.spec.template.spec.containers[0].env[?(@.name=="VELODEX_PEER_HOST")].valueFrom.fieldRef.fieldPath}'])).stdout === 'status.podIP' ? true : undefined));
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await untilOnlyNewPods();

    // Each pod reached by its own IP (the node is on the pods' bridge), not through the Service.
    const ips = (await k(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/instance=default', '-o', 'jsonpath={.items[*].status.podIP}'])).stdout.trim().split(/\s+/);
    expect(ips).toHaveLength(2);
    const pods = ips.map((ip) => `${ip}:8080`);
    type PeerStatus = { workers: number; storage: { peer_cache?: { serving: boolean; members: number; removed: number } } };
    const statusOf = async (pod: string) => (await (await fetch(`http://${pod}/+status`, { signal: AbortSignal.timeout(10_000) })).json()) as PeerStatus;
    // Every process of every pod is a member (the pods that rolled away left as they stopped).
    const processes = (await Promise.all(pods.map(statusOf))).reduce((n, s) => n + s.workers, 0);
    expect(processes).toBeGreaterThanOrEqual(2);
    const peerCaches = await until(`every pod serving copies, with all ${processes} processes as members`, async () => {
      const all = (await Promise.all(pods.map(statusOf))).map((s) => s.storage.peer_cache);
      return all.every((p) => p?.serving === true && p.members === processes) ? all : undefined;
    }, 60_000);
    expect(peerCaches.map((p) => p?.removed)).toEqual(pods.map(() => 0));

    const craneEnv = { HOME: work, DOCKER_CONFIG: join(work, 'docker-peers') };
    const crane = (args: string[], input?: string) => run(tool('crane'), [...args, '--insecure'], { env: craneEnv, input });
    for (const pod of pods) await crane(['auth', 'login', pod, '-u', '__token__', '--password-stdin'], TOKEN_TWO);
    const accept = 'application/vnd.oci.image.manifest.v1+json';
    /** The digest `pod` serves for the tag (checked against the bytes it serves), or null on a 404. */
    const served = async (pod: string, tag: string) => {
      const res = await fetch(`http://${pod}/v2/team/images/peer/manifests/${tag}`, { headers: { accept }, signal: AbortSignal.timeout(10_000) });
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status === 404) return null;
      expect(res.status).toBe(200);
      expect(res.headers.get('docker-content-digest')).toBe(`sha256:${sha256(body)}`);
      return res.headers.get('docker-content-digest');
    };
    /** Each pod reads the tag twice: its copy of what it found is kept. */
    const warm = async (tag: string) => {
      for (const pod of pods) for (let i = 0; i < 2; i++) await served(pod, tag);
    };
    const push = async (pod: string, tag: string, seed: string) => {
      const image = buildImage({ seed, layers: 1, bigFileSize: 2048 });
      await crane(['push', writeLayout(join(work, `peer-layout-${seed}`), [{ tag, item: image }]), `${pod}/team/images/peer:${tag}`]);
      return image.manifest.descriptor.digest;
    };

    // The tag moved through each pod in turn, each time after every pod has a copy of the old one.
    let moved = '';
    for (const [i, writer] of pods.entries()) {
      await warm('moving');
      moved = await push(writer, 'moving', `e2e-peer-${i}`);
      for (const pod of pods) expect(await served(pod, 'moving'), `${pod} after a push through ${writer}`).toBe(moved);
    }

    // MinIO's own count of the object GETs it answered (its root credentials, from the chart's Secret).
    const minioIp = (await k(['get', 'service', 'velodex-minio', '-n', 'velodex-system', '-o', 'jsonpath={.spec.clusterIP}'])).stdout.trim();
    const secret = JSON.parse((await k(['get', 'secret', 'velodex-minio', '-n', 'velodex-system', '-o', 'jsonpath={.data}'])).stdout) as Record<string, string>;
    const key = (name: string) => Buffer.from(secret[name] ?? '', 'base64').toString('utf8');
    const storeGets = () => minioObjectGets(`http://${minioIp}:9000`, { accessKey: key('access-key'), secretKey: key('secret-key') });

    await warm('stable');
    await crane(['tag', `${pods[0]}/team/images/peer:moving`, 'stable']);
    const cold = await storeGets();
    for (const pod of pods) expect(await served(pod, 'stable'), `${pod} after crane tag through ${pods[0]}`).toBe(moved);
    // The counter is read fresh: it moved across these reads, which had to ask the store.
    expect(await storeGets()).toBeGreaterThan(cold);

    // Warm manifest GETs on one pod. Each would be two object GETs without the copies
    // (peer-cache-replicas.test.ts); what is left are the members' own reads of their document
    // (one a second each) and whatever else the cluster asks meanwhile.
    const reader = pods.at(-1)!;
    await warm('moving');
    const before = await storeGets();
    const started = Date.now();
    for (let i = 0; i < 50; i++) expect(await served(reader, 'moving')).toBe(moved);
    const gets = (await storeGets()) - before;
    console.log(`peer_cache: 50 warm manifest GETs on ${reader} in ${Date.now() - started} ms cost MinIO ${gets} object GETs (from every client of the bucket)`);
    expect(gets).toBeLessThan(25);

    // A wheel uploaded through one pod is on every pod's next Simple page, the absent page too.
    const page = async (pod: string) => {
      const res = await fetch(`http://${pod}/team/hosted/simple/e2e-peer/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' }, signal: AbortSignal.timeout(10_000) });
      if (res.status === 404) {
        await res.arrayBuffer();
        return [];
      }
      expect(res.status).toBe(200);
      return ((await res.json()) as { files: { filename: string }[] }).files.map((f) => f.filename).sort();
    };
    const built = await wheels;
    const uploaded: string[] = [];
    for (const [writer, wheel] of pods.map((pod, i) => [pod, built[i]!] as const)) {
      for (const pod of pods) for (let n = 0; n < 2; n++) expect(await page(pod)).toEqual(uploaded);
      await run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `http://${writer}/team/hosted/`, '-u', '__token__', '-p', TOKEN_TWO, wheel.wheel], { env: { NO_COLOR: '1' } });
      uploaded.push(wheel.wheelFilename);
      uploaded.sort();
      for (const pod of pods) expect(await page(pod), `${pod} after an upload through ${writer}`).toEqual(uploaded);
    }

    // Every write reached every pod's listener at its pod IP: no pod was removed for want of an
    // answer (a write would then have waited out its lease), and all are members still.
    const after = (await Promise.all(pods.map(statusOf))).map((s) => s.storage.peer_cache);
    expect(after).toEqual(pods.map(() => ({ serving: true, members: processes, removed: 0 })));
    const logs = (await k(['logs', '-n', NS, '-l', 'app.kubernetes.io/instance=default', '--tail=-1'])).stdout;
    expect(logs).not.toMatch(/could not reach .*listener/);
  });

  it("serves HTTPS with spec.tls: Ready through the HTTPS probes and status poll, https in status.url and /+api, a renewed certificate served without a roll and without a failed request to a polling client; docker (the CA in its certs.d, no insecure registry) logs in, pushes and pulls, twine uploads and pip installs with the CA and no trusted-host", async () => {
    const ca = testCa(tempDir('velodex-e2e-tls-'), 'DNS:secure.team.svc');
    const secret = async (cert: IssuedCertificate) => {
      const yaml = (await k(['create', 'secret', 'tls', 'secure-cert', '-n', NS, `--cert=${cert.certFile}`, `--key=${cert.keyFile}`, '--dry-run=client', '-o', 'yaml'])).stdout;
      await k(['apply', '-f', '-'], yaml);
      await k(['label', 'secret', 'secure-cert', '-n', NS, 'velodex.dev/allow-reference=true', '--overwrite']);
    };
    const first = ca.issue('first');
    await secret(first);
    const storage = (await k(['get', 'packageregistry', 'default', '-n', NS, '-o', 'jsonpath={.spec.storage}'])).stdout;
    const registry = { apiVersion: 'velodex.dev/v1alpha1', kind: 'PackageRegistry', metadata: { name: 'secure', namespace: NS }, spec: { replicas: 1, storage: { ...JSON.parse(storage), prefix: 'secure' }, tls: { secretName: 'secure-cert' } } };
    const uploadTokenSecretRef = { name: 'upload-tokens', key: 'hosted' };
    const index = (name: string, ecosystem: string) => ({ apiVersion: 'velodex.dev/v1alpha1', kind: 'PackageIndex', metadata: { name: `secure-${name}`, namespace: NS }, spec: { registry: 'secure', route: `secure/${name}`, ecosystem, role: 'hosted', uploadTokenSecretRef } });
    await k(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [registry, index('hosted', 'python'), index('images', 'oci')] }));
    // Ready needs the HTTPS readiness probe and the operator's poll of the pod's /+status over HTTPS.
    await k(['wait', '--for=condition=Ready', 'packageregistry/secure', 'pidx/secure-hosted', 'pidx/secure-images', '-n', NS, '--timeout=240s']);
    expect((await k(['get', 'packageregistry', 'secure', '-n', NS, '-o', 'jsonpath={.status.url}'])).stdout).toBe('https://secure.team.svc');
    // The VERSION column: what the pods' /+status says they run (this tree's build).
    expect((await k(['get', 'packageregistry', 'secure', '-n', NS])).stdout).toMatch(new RegExp(`^secure\\s.*\\s${currentVersion.replace(/[.+]/g, '\\$&')}\\s`, 'm'));
    expect((await k(['get', 'pidx', 'secure-hosted', '-n', NS, '-o', 'jsonpath={.status.url}'])).stdout).toBe('https://secure.team.svc/secure/hosted/simple/');
    const ip = (await k(['get', 'service', 'secure', '-n', NS, '-o', 'jsonpath={.spec.clusterIP}'])).stdout.trim();
    const caPem = readFileSync(ca.caFile);
    // The Service's name is what the certificate names: connect to its address under that name.
    const served = () =>
      new Promise<string>((resolve, reject) => {
        const socket = connectTls({ host: ip, port: 443, servername: 'secure.team.svc', ca: caPem }, () => {
          resolve(socket.getPeerCertificate().fingerprint256);
          socket.end();
        });
        socket.once('error', reject);
      });
    // Ready is the pods' word (the operator asks each pod); the Service's address answers once the
    // node's proxy rules name a ready pod (a run saw ECONNREFUSED right after Ready on a busy machine).
    await k(['rollout', 'status', 'deployment/secure', '-n', NS, '--timeout=240s']);
    expect(await until('the Service answering over TLS', () => served().catch(() => undefined), 60_000)).toBe(first.fingerprint256);
    const api = await run('curl', ['-sS', '--fail', '--cacert', ca.caFile, '--resolve', `secure.team.svc:443:${ip}`, 'https://secure.team.svc/+api']);
    expect(api.stdout).toContain('"https://secure.team.svc/secure/hosted/simple/"');
    expect(api.stdout).not.toContain('http://secure.team.svc');
    // A plain-HTTP client gets no answer it could mistake for one.
    expect((await run('curl', ['-sS', `http://${ip}:443/+status`], { allowFailure: true })).code).not.toBe(0);

    const pods = async () => (await k(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/instance=secure', '-o', 'jsonpath={.items[*].metadata.name}'])).stdout.trim();
    const before = await pods();
    // A client polls through the renewal, each request on a new connection (so each sees the
    // certificate served at that moment), and notes which one answered it.
    const seen: string[] = [];
    const poller = poll([
      async () => {
        const res = await httpsGet(ip, 'secure.team.svc', caPem, '/secure/hosted/simple/');
        if (res.status !== 200) throw new Error(`GET /secure/hosted/simple/: ${res.status}`);
        seen.push(res.fingerprint);
      },
    ]);
    // The renewal also names the Service's address: the clients below connect by it.
    const second = ca.issue('second', `DNS:secure.team.svc,IP:${ip}`);
    await secret(second);
    // The kubelet updates the mounted files at its next sync of the pod (within about a minute), the registry within 2 s of that.
    await until('the renewed certificate served', async () => ((await served().catch(() => '')) === second.fingerprint256 ? true : undefined), 240_000);
    const okAtRenewal = poller.ok;
    await until('requests answered with the renewed certificate', async () => (poller.ok >= okAtRenewal + 10 ? true : undefined), 60_000);
    const polled = await poller.stop();
    console.log(`certificate renewal: ${polled.ok + polled.failures.length} requests polled, ${polled.failures.length} failed (${seen.filter((f) => f === first.fingerprint256).length} answered with the first certificate, ${seen.filter((f) => f === second.fingerprint256).length} with the renewed one)`);
    expect(polled.failures).toEqual([]);
    expect([seen[0], seen.at(-1)]).toEqual([first.fingerprint256, second.fingerprint256]);
    expect(await pods()).toBe(before);

    // Real clients over TLS, trusting the suite's CA and nothing else.
    const clients = tempDir('velodex-e2e-tls-clients-');
    dockerd = await startDockerd(clients, { trust: [{ registry: ip, caFile: ca.caFile }] });
    // docker allows plain HTTP only where it is told to (and on loopback): not to this registry.
    const insecure = JSON.parse((await dockerd.docker(['info', '--format', '{{json .RegistryConfig.InsecureRegistryCIDRs}}'])).stdout) as string[];
    expect(insecure.filter((cidr) => !cidr.startsWith('127.') && cidr !== '::1/128')).toEqual([]);
    writeFileSync(join(clients, 'rootfs.tar'), tar(new Map([['served-over-tls.txt', Buffer.from('pushed by docker over TLS\n')]])));
    await dockerd.docker(['import', join(clients, 'rootfs.tar'), 'local/tls:v1']);
    const ref = `${ip}/secure/images/app:v1`;
    await dockerd.docker(['login', '-u', '__token__', '--password-stdin', ip], { input: `${TOKEN_TWO}\n` });
    await dockerd.docker(['tag', 'local/tls:v1', ref]);
    const pushed = await dockerd.docker(['push', ref], { timeoutMs: 120_000 });
    const digest = /digest: (sha256:[0-9a-f]{64})/.exec(pushed.stdout)?.[1];
    expect(digest, pushed.stdout).toBeDefined();
    await dockerd.docker(['rmi', ref, 'local/tls:v1']);
    await dockerd.docker(['pull', ref], { timeoutMs: 120_000 });
    expect((await dockerd.docker(['inspect', '--format', '{{index .RepoDigests 0}}', ref])).stdout.trim()).toBe(`${ip}/secure/images/app@${digest}`);
    await dockerd.stop();
    // An engine without the CA is refused: TLS is what it talks, and the CA is what it trusts.
    dockerd = await startDockerd(tempDir('velodex-e2e-untrusting-'));
    const untrusting = await dockerd.docker(['login', '-u', '__token__', '--password-stdin', ip], { input: `${TOKEN_TWO}\n`, allowFailure: true });
    expect(untrusting.code).not.toBe(0);
    expect(untrusting.stderr).toContain('x509: certificate signed by unknown authority');
    await dockerd.stop();
    dockerd = undefined;

    const wheel = await buildProject('e2e-tls', '1.0');
    // Only the CA given on the command line: requests (twine) prefers a machine's REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE to --cert.
    const env = { ...CLEAN_ENV, REQUESTS_CA_BUNDLE: '', CURL_CA_BUNDLE: '', NO_COLOR: '1' };
    await run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--cert', ca.caFile, '--repository-url', `https://${ip}/secure/hosted/`, '-u', '__token__', '-p', TOKEN_TWO, wheel.wheel], { env });
    const site = join(clients, 'site');
    const installed = await run(tool('pip'), ['install', '--no-deps', '--no-cache-dir', '--target', site, '--cert', ca.caFile, '--index-url', `https://${ip}/secure/hosted/simple/`, 'e2e-tls==1.0'], { env });
    expect(installed.stdout).toContain('Successfully installed e2e-tls-1.0');
    expect(existsSync(join(site, 'e2e_tls-1.0.dist-info'))).toBe(true);
  });

  it("spreads a registry's pods and limits their scratch by default, and adds and removes its autoscaler, NetworkPolicy and Ingress under the chart's RBAC", async () => {
    const pod = JSON.parse((await k(['get', 'deployment', 'secure', '-n', NS, '-o', 'jsonpath={.spec.template.spec}'])).stdout) as { topologySpreadConstraints: { topologyKey: string }[]; volumes: { name: string; emptyDir?: { sizeLimit?: string } }[]; containers: { resources: unknown }[] };
    expect(pod.topologySpreadConstraints.map((c) => c.topologyKey)).toEqual(['kubernetes.io/hostname', 'topology.kubernetes.io/zone']);
    expect(pod.volumes.find((v) => v.name === 'data')?.emptyDir?.sizeLimit).toBe('10Gi');
    expect(pod.containers[0]?.resources).toEqual({ requests: { cpu: '250m', memory: '256Mi' } });
    const ingress = { host: 'secure.example.com', tlsSecretName: 'secure-outside' };
    await k(['patch', 'packageregistry', 'secure', '-n', NS, '--type=merge', '-p', JSON.stringify({ spec: { autoscaling: { minReplicas: 1, maxReplicas: 2 }, networkPolicy: {}, ingress } })]);
    await until('the autoscaler, the NetworkPolicy and the Ingress', async () => ((await k(['get', 'hpa,networkpolicy,ingress', 'secure', '-n', NS, '-o', 'name'], undefined).catch(() => ({ stdout: '' }))).stdout.trim().split('\n').length === 3 ? true : undefined));
    // Clients are told the Ingress's address.
    expect(await until('status.url of the Ingress', async () => ((await k(['get', 'packageregistry', 'secure', '-n', NS, '-o', 'jsonpath={.status.url}'])).stdout === 'https://secure.example.com' ? true : undefined))).toBe(true);
    // Its storage is the default registry's, peerCache included (the step before): the policy also
    // admits the registry's own pods on any TCP port, where each process takes its invalidation
    // listener. This cluster's bridge CNI plugin enforces no NetworkPolicy, so this shows the
    // object, not that it lets the peers talk.
    expect((await k(['get', 'packageregistry', 'secure', '-n', NS, '-o', 'jsonpath={.spec.storage.peerCache}'])).stdout).toBe('true');
    const policy = JSON.parse((await k(['get', 'networkpolicy', 'secure', '-n', NS, '-o', 'json'])).stdout) as { spec: { ingress: unknown[] } };
    expect(policy.spec.ingress).toContainEqual({ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'velodex', 'app.kubernetes.io/instance': 'secure' } } }], ports: [{ protocol: 'TCP' }] });
    // The registry still answers through its NetworkPolicy (every pod may reach it; this client is the node).
    await k(['wait', '--for=condition=Ready', 'packageregistry/secure', '-n', NS, '--timeout=240s']);
    await k(['patch', 'packageregistry', 'secure', '-n', NS, '--type=json', '-p', '[{"op":"remove","path":"/spec/autoscaling"},{"op":"remove","path":"/spec/networkPolicy"},{"op":"remove","path":"/spec/ingress"}]']);
    await until('all three removed', async () => ((await k(['get', 'hpa,networkpolicy,ingress', '-n', NS, '-o', 'name'])).stdout.trim() === '' ? true : undefined));
    await k(['delete', 'pidx/secure-hosted', 'pidx/secure-images', 'packageregistry/secure', '-n', NS, '--wait=true', '--timeout=120s']);
  });

  it('replaces a killed registry pod and loses nothing; scaled to zero it is NoReadyPods, and Ready again after', async () => {
    const podsJson = async () =>
      JSON.parse((await k(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/instance=default', '-o', 'json'])).stdout) as {
        items: { metadata: { name: string; deletionTimestamp?: string }; status: { conditions?: { type: string; status: string }[] } }[];
      };
    const killed = (await podsJson()).items[0]!.metadata.name;
    await k(['delete', 'pod', killed, '-n', NS, '--wait=false']);
    // A replacement: two pods again, both ready, the killed one not among them.
    const replaced = await until('a ready replacement of the killed pod', async () => {
      const items = (await podsJson()).items;
      const ready = items.filter((p) => !p.metadata.deletionTimestamp && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      return items.length === 2 && ready.length === 2 && !items.some((p) => p.metadata.name === killed) ? ready.map((p) => p.metadata.name) : undefined;
    });
    expect(replaced).not.toContain(killed);
    // Nothing lost: every wheel and image acknowledged to this suite's clients comes back whole.
    expect(acknowledged.wheels.length).toBeGreaterThanOrEqual(2);
    expect(acknowledged.images.length).toBeGreaterThanOrEqual(1);
    for (const [i, w] of acknowledged.wheels.entries()) {
      const dest = join(work, `pip-2-${i}`);
      await pip(['download', '--no-deps', '--no-cache-dir', '-d', dest, `${w.project}==${w.version}`], 'team/hosted');
      expect(readFileSync(join(dest, basename(w.file))).equals(readFileSync(w.file))).toBe(true);
    }
    // The upload token rotated since the push: the reader logs in with the current one.
    const env = { DOCKER_CONFIG: join(work, 'docker-readback'), HOME: work };
    await run(tool('crane'), ['auth', 'login', service, '-u', '__token__', '--password-stdin', '--insecure'], { env, input: TOKEN_TWO });
    for (const [i, image] of acknowledged.images.entries()) {
      const ref = `${service}/${image.ref}`;
      expect((await run(tool('crane'), ['digest', ref, '--insecure'], { env })).stdout.trim()).toBe(image.digest);
      // crane checks every layer's digest as it writes the layout.
      await run(tool('crane'), ['pull', '--format', 'oci', ref, join(work, `pulled-${i}`), '--insecure'], { env });
    }

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

  it('soaks under faults: steady pip, twine and crane traffic while pods are killed, the index is edited, the operator leader is killed and MinIO restarts; nothing acknowledged is lost, no read fails outside the MinIO outage', async () => {
    const SOAK_MS = 150_000;
    const soak = join(work, 'soak');
    mkdirSync(soak, { recursive: true });
    const docker = { DOCKER_CONFIG: join(soak, 'docker'), HOME: soak };
    const crane = (args: string[], allowFailure = false) => run(tool('crane'), [...args, '--insecure'], { env: docker, allowFailure, timeoutMs: 120_000 });
    await run(tool('crane'), ['auth', 'login', service, '-u', '__token__', '--password-stdin', '--insecure'], { env: docker, input: TOKEN_TWO });
    const host = service.split(':')[0] ?? service;
    // What the writers send, made before the clock starts.
    const wheels = await Promise.all(Array.from({ length: 8 }, (_, i) => buildProject('e2e-soak', `1.${i}`)));
    const images = Array.from({ length: 8 }, (_, i) => {
      const image = buildImage({ seed: `e2e-soak-${i}`, layers: 2, bigFileSize: 64 * 1024 });
      return { tag: `s${i}`, digest: image.manifest.descriptor.digest, layout: writeLayout(join(soak, `layout-${i}`), [{ tag: `s${i}`, item: image }]) };
    });
    const readImage = acknowledged.images[0]!;

    interface Op { kind: string; ok: boolean; at: number; end: number; detail?: string }
    const ops: Op[] = [];
    const t0 = Date.now();
    const running = () => Date.now() - t0 < SOAK_MS;
    const attempt = async (kind: string, fn: () => Promise<{ code: number; stdout: string; stderr: string }>) => {
      const at = Date.now();
      const res = await fn().catch((err: Error) => ({ code: -1, stdout: '', stderr: err.message }));
      ops.push({ kind, ok: res.code === 0, at, end: Date.now(), ...(res.code === 0 ? {} : { detail: (res.stderr || res.stdout).slice(-300) }) });
      return res.code === 0;
    };
    const ackedWheels: typeof wheels = [];
    const ackedImages: typeof images = [];
    const pipArgs = (dest: string, spec: string) => ['download', '--no-deps', '--no-cache-dir', '-d', dest, '--trusted-host', host, '--index-url', `http://${service}/team/hosted/simple/`, spec];
    const pipEnv = { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1' };
    const clients = [
      (async () => {
        for (let n = 0; running(); n++) await attempt('pip read', () => run(tool('pip'), pipArgs(join(soak, `read-${n}`), 'e2e-demo==1.0'), { env: pipEnv, allowFailure: true, timeoutMs: 120_000 }));
      })(),
      (async () => {
        for (let n = 0; running(); n++) await attempt('crane read', () => crane(['pull', '--format', 'oci', `${service}/${readImage.ref}`, join(soak, `pull-${n}`)], true));
      })(),
      (async () => {
        for (const w of wheels) {
          if (!running()) break;
          if (await attempt('twine upload', () => twine(TOKEN_TWO, [w.wheel], true))) ackedWheels.push(w);
          await new Promise((r) => setTimeout(r, 8000));
        }
      })(),
      (async () => {
        for (const image of images) {
          if (!running()) break;
          if (await attempt('crane push', () => crane(['push', image.layout, `${service}/team/images/soak:${image.tag}`], true))) ackedImages.push(image);
          await new Promise((r) => setTimeout(r, 8000));
        }
      })(),
    ];

    // The faults, on a schedule; the MinIO outage is the time from its kill to its pod ready again.
    const faults: string[] = [];
    const outage = { from: 0, to: 0 };
    const at = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, t0 + ms - Date.now())));
    const registryPods = async () => (await k(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/instance=default', '--field-selector=status.phase=Running', '-o', 'jsonpath={.items[*].metadata.name}'])).stdout.trim().split(/\s+/).filter(Boolean);
    const killPod = async (when: number) => {
      await at(when);
      const pod = (await registryPods())[0];
      if (!pod) return;
      await k(['delete', 'pod', pod, '-n', NS, '--wait=false']);
      faults.push(`${Math.round((Date.now() - t0) / 1000)} s: registry pod ${pod} deleted`);
    };
    const schedule = (async () => {
      await killPod(10_000);
      await at(25_000);
      const leader = (await k(['get', 'lease', 'velodex-operator', '-n', 'velodex-system', '-o', 'jsonpath={.spec.holderIdentity}'])).stdout.trim();
      await k(['delete', 'pod', leader, '-n', 'velodex-system', '--grace-period=0', '--force']);
      faults.push(`${Math.round((Date.now() - t0) / 1000)} s: operator leader ${leader} killed`);
      await killPod(40_000);
      await at(55_000);
      await k(['patch', 'pidx', 'pypi', '-n', NS, '--type=merge', '-p', '{"spec":{"upstreamConcurrency":7}}']);
      faults.push(`${Math.round((Date.now() - t0) / 1000)} s: index pypi edited (the pods roll)`);
      await at(80_000);
      const minio = JSON.parse((await k(['get', 'pods', '-n', 'velodex-system', '-l', 'app.kubernetes.io/component=minio', '-o', 'json'])).stdout) as {
        items: { metadata: { name: string }; status: { containerStatuses: { containerID: string; restartCount: number; ready: boolean }[] } }[];
      };
      const before = minio.items[0]!.status.containerStatuses[0]!;
      outage.from = Date.now();
      await node.killContainer(before.containerID);
      faults.push(`${Math.round((Date.now() - t0) / 1000)} s: MinIO's container killed`);
      await until('MinIO back', async () => {
        const now = (JSON.parse((await k(['get', 'pods', '-n', 'velodex-system', '-l', 'app.kubernetes.io/component=minio', '-o', 'json'])).stdout) as typeof minio).items[0]?.status.containerStatuses[0];
        return now && now.restartCount > before.restartCount && now.ready ? true : undefined;
      });
      outage.to = Date.now();
      faults.push(`${Math.round((Date.now() - t0) / 1000)} s: MinIO ready again (${Math.round((outage.to - outage.from) / 1000)} s out)`);
      await killPod(110_000);
      await killPod(135_000);
    })();
    await Promise.all([schedule, ...clients]);
    await k(['rollout', 'status', 'deployment/default', '-n', NS, '--timeout=240s']);
    await untilOnlyNewPods();

    // Everything acknowledged, fetched back and checked.
    const lost: string[] = [];
    for (const w of ackedWheels) {
      const dest = join(soak, `check-${basename(w.wheel)}`);
      const res = await run(tool('pip'), pipArgs(dest, `e2e-soak==${basename(w.wheel).split('-')[1]}`), { env: pipEnv, allowFailure: true });
      if (res.code !== 0 || !readFileSync(join(dest, basename(w.wheel))).equals(readFileSync(w.wheel))) lost.push(basename(w.wheel));
    }
    for (const image of ackedImages) {
      const ref = `${service}/team/images/soak:${image.tag}`;
      const digest = await crane(['digest', ref], true);
      const pulled = await crane(['pull', '--format', 'oci', ref, join(soak, `check-${image.tag}`)], true);
      if (digest.stdout.trim() !== image.digest || pulled.code !== 0) lost.push(ref);
    }
    // A request that overlapped the outage, or began within 10 s after it (sockets to MinIO reconnecting), counts as in it.
    const inOutage = (op: Op) => op.end >= outage.from && op.at <= outage.to + 10_000;
    const summary = ['pip read', 'crane read', 'twine upload', 'crane push'].map((kind) => {
      const mine = ops.filter((o) => o.kind === kind);
      const failed = mine.filter((o) => !o.ok);
      return `${kind}: ${mine.length} attempted, ${failed.length} failed (${failed.filter(inOutage).length} during the MinIO outage)`;
    });
    console.log(['soak under faults', ...faults, ...summary, `acknowledged and read back: ${ackedWheels.length} wheels, ${ackedImages.length} images; lost: ${lost.length}`].join('\n'));
    expect(lost).toEqual([]);
    const readFailures = ops.filter((o) => o.kind.endsWith('read') && !o.ok && !inOutage(o));
    expect(readFailures.map((o) => `${o.kind} at ${Math.round((o.at - t0) / 1000)} s: ${o.detail}`)).toEqual([]);
    // Writes went on: most were acknowledged (a write in the outage may fail, and say so).
    expect(ackedWheels.length).toBeGreaterThan(0);
    expect(ackedImages.length).toBeGreaterThan(0);
    expect(ops.filter((o) => o.kind.endsWith('read')).length).toBeGreaterThan(20);
  }, 600_000);
});
