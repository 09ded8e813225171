/**
 * The Helm chart: `helm lint` with every option, every rendered object accepted by a real API
 * server (`kubectl apply --dry-run=server`), `helm install` against it, and the RBAC it installs
 * proven least-privilege and sufficient: the operator, running with the chart's ServiceAccount
 * token, reconciles a registry; the same account may not delete workloads, write Secrets or get
 * one by name. Every pod the chart runs (the operator, the trial MinIO and its bucket Job) passes
 * the API server's own Pod Security admission at the `restricted` level.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApi, type KubeApi } from '../support/kube-apiserver.js';
import { REPO, tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { stopChild } from '../support/stop-child.js';

const CHART = join(REPO, 'charts', 'velodex');

/** The parts of a rendered object these tests read. */
interface Container {
  image?: string;
  env?: { name: string; value?: string }[];
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string }[];
}
interface Manifest {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: { template?: { spec?: { securityContext?: Record<string, unknown>; containers?: Container[]; volumes?: { name: string; emptyDir?: unknown }[] } } };
}
const MINIO = ['--set', 'minio.enabled=true', '--set', 'minio.secretKey=trial-secret-123'];
let api: KubeApi;
let operator: ChildProcess | undefined;

const kubectl = (args: string[], input?: string, allowFailure = false): Promise<RunResult> => run(tool('kubectl'), args, { env: api.env, input, allowFailure, timeoutMs: 60_000 });
const helm = (args: string[], allowFailure = false): Promise<RunResult> => run(tool('helm'), args, { env: { ...api.env, HELM_CACHE_HOME: join(api.env.HOME ?? '', 'helm-cache'), HELM_CONFIG_HOME: join(api.env.HOME ?? '', 'helm-config') }, allowFailure, timeoutMs: 120_000 });

/** Rendered YAML as objects, read by kubectl (which prints one pretty-printed JSON object after another). */
async function manifests(yaml: string): Promise<Manifest[]> {
  const out = (await kubectl(['create', '--dry-run=client', '-o', 'json', '-f', '-'], yaml)).stdout;
  return out
    .split(/\n(?=\{)/)
    .filter((part) => part.trim() !== '')
    .map((part) => JSON.parse(part) as Manifest);
}

beforeAll(async () => {
  api = await startKubeApi();
}, 180_000);

afterAll(async () => {
  if (operator) await stopChild(operator);
  await api?.stop();
});

describe('charts/velodex', () => {
  it('passes helm lint with the defaults and with every option on', async () => {
    for (const extra of [[], [...MINIO, '--set', 'serviceMonitor.enabled=true', '--set', 'operator.replicas=2']]) {
      const res = await helm(['lint', CHART, ...extra]);
      expect(res.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    }
  });

  it('refuses the trial MinIO without a secret key, saying which value to set', async () => {
    const res = await helm(['template', 'v', CHART, '--set', 'minio.enabled=true'], true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('minio.secretKey must be set (at least 8 characters) when minio.enabled is true');
  });

  it('renders objects the API server accepts (server-side dry run), CRDs included', async () => {
    const rendered = await helm(['template', 'v', CHART, '--include-crds', '-n', 'velodex-system', '--kube-version', '1.34.2', ...MINIO]);
    await kubectl(['create', 'namespace', 'velodex-system']);
    // CRDs first: the dry run of a resource of a kind the server does not know yet would fail.
    const res = await kubectl(['apply', '--dry-run=server', '-f', '-'], rendered.stdout);
    for (const kind of ['customresourcedefinition', 'clusterrole', 'deployment.apps/v-operator', 'deployment.apps/v-minio', 'job.batch/v-minio-bucket', 'service/v-minio', 'secret/velodex-minio']) {
      expect(res.stdout).toContain(kind);
    }
    // The ServiceMonitor (Prometheus Operator's kind, not on this API server) renders its selector.
    const monitor = await helm(['template', 'v', CHART, '--set', 'serviceMonitor.enabled=true', '--show-only', 'templates/servicemonitor.yaml']);
    expect(monitor.stdout).toContain('app.kubernetes.io/component: registry');
    expect(monitor.stdout).toContain('path: /metrics');
  });

  it('runs the trial MinIO from a pinned image, as restricted pods (Pod Security admission warns of nothing)', async () => {
    await kubectl(['create', 'namespace', 'restricted']);
    await kubectl(['label', 'namespace', 'restricted', 'pod-security.kubernetes.io/enforce=restricted', 'pod-security.kubernetes.io/warn=restricted']);
    const rendered = await helm(['template', 'v', CHART, '-n', 'restricted', ...MINIO]);
    const res = await kubectl(['apply', '--dry-run=server', '-f', '-'], rendered.stdout);
    expect(res.stdout).toContain('deployment.apps/v-minio');
    expect(res.stderr).not.toContain('would violate PodSecurity');

    const minio = await helm(['template', 'v', CHART, '-n', 'restricted', ...MINIO, '--show-only', 'templates/minio.yaml']);
    const objects = await manifests(minio.stdout);
    const of = (kind: string) => objects.find((o) => o.kind === kind);
    const pod = of('Deployment')?.spec?.template?.spec;
    const container = pod?.containers?.[0];
    expect(container?.image).toMatch(/^docker\.io\/minio\/minio:RELEASE\.\d{4}-\d\d-\d\dT[\d-]+Z$/);
    expect(pod?.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container?.securityContext).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    // A read-only root: MinIO writes its drive and config under /data, scratch under /tmp.
    expect(container?.volumeMounts?.map((m) => m.mountPath).sort()).toEqual(['/data', '/tmp']);
    expect(pod?.volumes?.every((v) => v.emptyDir !== undefined)).toBe(true);
    expect(of('Job')?.spec?.template?.spec?.containers?.[0]?.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    // A PackageRegistry of the release's namespace may name the trial's Secret: it opts in.
    expect(of('Secret')?.metadata.labels?.['velodex.dev/allow-reference']).toBe('true');
  });

  it('gives the operator the images a registry may run besides its own, from registry.allowedImages', async () => {
    const env = async (extra: string[]) => {
      const out = await helm(['template', 'v', CHART, '--show-only', 'templates/operator.yaml', ...extra]);
      const [deployment] = await manifests(out.stdout);
      return deployment?.spec?.template?.spec?.containers?.[0]?.env?.find((e) => e.name === 'VELODEX_ALLOWED_IMAGES')?.value;
    };
    expect(await env([])).toBe('');
    expect(await env(['--set', 'registry.allowedImages={ghcr.io/acme/velodex:*,registry.example/velodex@sha256:*}'])).toBe('ghcr.io/acme/velodex:*,registry.example/velodex@sha256:*');
  });

  it('installs with helm, and the operator reconciles with exactly the RBAC the chart grants', async () => {
    const install = await helm(['install', 'v', CHART, '-n', 'velodex-system', '--set', 'image.tag=test']);
    expect(install.stdout).toContain('STATUS: deployed');
    const sa = 'system:serviceaccount:velodex-system:v-operator';
    const can = async (verb: string, resource: string, ns = 'team') => {
      const [kind, sub] = resource.split('/');
      const args = ['auth', 'can-i', verb, kind!, '-n', ns, `--as=${sa}`, ...(sub ? [`--subresource=${sub}`] : [])];
      return (await kubectl(args, undefined, true)).stdout.trim();
    };
    // The Gateway API's and cert-manager's CRDs: kubectl can-i names a resource only the API server serves.
    await kubectl(['apply', '--server-side', '-f', tool('gateway-api-crds'), '-f', tool('cert-manager-crds')]);
    await kubectl(['wait', '--for=condition=Established', 'crd/httproutes.gateway.networking.k8s.io', 'crd/gateways.gateway.networking.k8s.io', 'crd/certificates.cert-manager.io', 'crd/clusterissuers.cert-manager.io', '--timeout=60s']);
    for (const [verb, resource] of [['list', 'packageindexes.velodex.dev'], ['patch', 'packageindexes.velodex.dev/status'], ['create', 'deployments.apps'], ['patch', 'configmaps'], ['patch', 'serviceaccounts'], ['watch', 'secrets'], ['list', 'pods'], ['patch', 'httproutes.gateway.networking.k8s.io'], ['delete', 'httproutes.gateway.networking.k8s.io'], ['patch', 'certificates.cert-manager.io'], ['delete', 'certificates.cert-manager.io']]) {
      expect(await can(verb!, resource!), `${verb} ${resource}`).toBe('yes');
    }
    // Secrets: listed and watched (by the opt-in label), never read one by one nor written. Of the
    // Gateway API and cert-manager, only the registry's own HTTPRoute and Certificate.
    for (const [verb, resource] of [['delete', 'deployments.apps'], ['create', 'secrets'], ['get', 'secrets'], ['patch', 'packageindexes.velodex.dev'], ['create', 'pods'], ['delete', 'packageregistries.velodex.dev'], ['create', 'gateways.gateway.networking.k8s.io'], ['create', 'issuers.cert-manager.io'], ['create', 'clusterissuers.cert-manager.io']]) {
      expect(await can(verb!, resource!), `${verb} ${resource}`).toBe('no');
    }
    expect(await can('update', 'leases.coordination.k8s.io', 'velodex-system')).toBe('yes');
    expect(await can('update', 'leases.coordination.k8s.io', 'team')).toBe('no');

    // The operator with the ServiceAccount's own token (what its pod would mount).
    const token = (await kubectl(['create', 'token', 'v-operator', '-n', 'velodex-system'])).stdout.trim();
    const kubeconfig = join(api.env.HOME ?? '', 'operator-kubeconfig');
    writeFileSync(kubeconfig, `apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: { server: "${api.server}", insecure-skip-tls-verify: true }\nusers:\n- name: sa\n  user: { token: "${token}" }\ncontexts:\n- name: c\n  context: { cluster: c, user: sa }\ncurrent-context: c\n`);
    await kubectl(['create', 'namespace', 'team']);
    await kubectl(['create', 'secret', 'generic', 's3', '-n', 'team', '--from-literal=access-key=a', '--from-literal=secret-key=s']);
    await kubectl(['label', 'secret', 's3', '-n', 'team', 'velodex.dev/allow-reference=true']);
    await kubectl(['create', 'secret', 'generic', 'unlabelled', '-n', 'team', '--from-literal=token=t']);
    await kubectl(
      ['apply', '-f', '-'],
      'apiVersion: velodex.dev/v1alpha1\nkind: PackageRegistry\nmetadata: { name: default, namespace: team }\nspec:\n  storage: { endpoint: "http://v-minio.velodex-system.svc:9000", bucket: velodex, credentialsSecretRef: { name: s3 } }\n---\n' +
        'apiVersion: velodex.dev/v1alpha1\nkind: PackageIndex\nmetadata: { name: hosted, namespace: team }\nspec: { route: team/hosted, ecosystem: python, role: hosted, access: { serviceAccounts: [{ name: builder, scopes: [upload] }] } }\n---\n' +
        // Names a Secret that did not opt in: the operator finds out by a metadata-only list, which its RBAC allows.
        'apiVersion: velodex.dev/v1alpha1\nkind: PackageIndex\nmetadata: { name: borrow, namespace: team }\nspec: { route: team/borrow, ecosystem: python, role: hosted, uploadTokenSecretRef: { name: unlabelled, key: token } }\n',
    );
    let logs = '';
    operator = spawn(process.execPath, [join(REPO, 'operator', 'dist', 'main.js')], {
      env: { PATH: process.env.PATH, KUBECONFIG: kubeconfig, VELODEX_IMAGE: 'docker.io/velodex/velodex:test', POD_NAMESPACE: 'velodex-system', POD_NAME: 'sa-operator', VELODEX_OPERATOR_PORT: '0', VELODEX_RESYNC_SECONDS: '2' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    operator.stdout?.on('data', (b: Buffer) => (logs += b.toString()));
    operator.stderr?.on('data', (b: Buffer) => (logs += b.toString()));
    const deadline = Date.now() + 60_000;
    let reason = '';
    while (Date.now() < deadline && reason !== 'NoReadyPods') {
      const ix = JSON.parse((await kubectl(['get', 'pidx', 'hosted', '-n', 'team', '-o', 'json'])).stdout) as { status?: { conditions?: { type: string; reason: string }[] } };
      reason = ix.status?.conditions?.find((c) => c.type === 'Ready')?.reason ?? '';
      if (reason !== 'NoReadyPods') await new Promise((r) => setTimeout(r, 300));
    }
    expect(reason, logs).toBe('NoReadyPods');
    const borrow = JSON.parse((await kubectl(['get', 'pidx', 'borrow', '-n', 'team', '-o', 'json'])).stdout) as { status?: { conditions?: { type: string; reason: string }[] } };
    expect(borrow.status?.conditions?.find((c) => c.type === 'Ready')?.reason, logs).toBe('SecretNotOptedIn');
    expect((await kubectl(['get', 'deployment', 'default', '-n', 'team', '-o', 'name'])).stdout.trim()).toBe('deployment.apps/default');
    expect(logs).not.toContain('forbidden');

    // The registry pods run as the registry's own ServiceAccount, which reads the cluster's
    // ServiceAccount issuer through the chart's binding (Kubernetes' own default one removed).
    expect((await kubectl(['get', 'serviceaccount', 'velodex-default', '-n', 'team', '-o', 'name'])).stdout.trim()).toBe('serviceaccount/velodex-default');
    await kubectl(['delete', 'clusterrolebinding', 'system:service-account-issuer-discovery']);
    for (const path of ['/.well-known/openid-configuration', '/openid/v1/jwks']) {
      expect((await kubectl(['auth', 'can-i', 'get', path, '--as=system:serviceaccount:team:velodex-default'], undefined, true)).stdout.trim(), path).toBe('yes');
      expect((await kubectl(['auth', 'can-i', 'get', path, '--as=someone'], undefined, true)).stdout.trim(), path).toBe('no');
    }
  });

  it('binds the issuer discovery ClusterRole to the namespaces listed in registry.issuerDiscovery, or to none when told not to', async () => {
    const binding = async (extra: string[]) => {
      const out = await helm(['template', 'v', CHART, '--show-only', 'templates/rbac.yaml', ...extra]);
      return (await manifests(out.stdout)).find((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'v-operator-issuer-discovery') as
        | (Manifest & { roleRef: { name: string }; subjects: { kind: string; name: string }[] })
        | undefined;
    };
    const every = await binding([]);
    expect(every?.roleRef.name).toBe('system:service-account-issuer-discovery');
    expect(every?.subjects).toEqual([{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'system:serviceaccounts' }]);
    expect((await binding(['--set', 'registry.issuerDiscovery.namespaces={team,ci}']))?.subjects.map((s) => s.name)).toEqual(['system:serviceaccounts:team', 'system:serviceaccounts:ci']);
    expect(await binding(['--set', 'registry.issuerDiscovery.bind=false'])).toBeUndefined();
  });
});
