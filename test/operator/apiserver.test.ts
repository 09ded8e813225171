/**
 * The CRDs and the operator against a real kube-apiserver and etcd (no nodes, so no pod ever
 * runs: every served index reports NoReadyPods). Driven with kubectl as a platform team would:
 * invalid specs are refused at apply time with the schema's messages; the operator renders each
 * registry's objects, reports why an index is not served, rolls the pods' checksum when a Secret
 * rotates, and of two operator replicas only the Lease holder writes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { argoHealth } from '../support/argocd-health.js';
import { until as untilSeen } from '../support/until.js';
import { startKubeApi, type KubeApi } from '../support/kube-apiserver.js';
import { REPO, tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { stopChild } from '../support/stop-child.js';

let api: KubeApi;
const operators: ChildProcess[] = [];
const operatorLogs: string[] = [];

function kubectl(args: string[], input?: string, allowFailure = false): Promise<RunResult> {
  return run(tool('kubectl'), args, { env: api.env, input, allowFailure, timeoutMs: 60_000 });
}

async function json<T>(args: string[]): Promise<T> {
  return JSON.parse((await kubectl([...args, '-o', 'json'])).stdout) as T;
}

function startOperator(identity: string): ChildProcess {
  const child = spawn(process.execPath, [join(REPO, 'operator', 'dist', 'main.js')], {
    env: { PATH: process.env.PATH, KUBECONFIG: api.kubeconfig, VELODEX_IMAGE: 'docker.io/velodex/velodex:test', POD_NAMESPACE: 'velodex-system', POD_NAME: identity, VELODEX_RESYNC_SECONDS: '2', VELODEX_OPERATOR_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const i = operatorLogs.push('') - 1;
  const keep = (b: Buffer) => (operatorLogs[i] += b.toString());
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  operators.push(child);
  return child;
}

/** Polls until the operator has done something, with its logs when it never does. */
function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  return untilSeen(what, check, { timeoutMs, context: () => `operator logs:\n${operatorLogs.join('\n---\n').slice(-6000)}` });
}

interface Cond {
  type: string;
  status: string;
  reason: string;
  message: string;
}
interface Obj {
  metadata: { name: string; generation?: number; annotations?: Record<string, string>; ownerReferences?: { kind: string; name: string }[] };
  status?: { conditions?: Cond[]; observedGeneration?: number; url?: string };
  spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
  data?: Record<string, string>;
}

const ready = (o: Obj) => o.status?.conditions?.find((c) => c.type === 'Ready');

async function readyOf(name: string): Promise<Cond | undefined> {
  const o = await json<Obj>(['get', 'packageindex', name, '-n', 'team']);
  return o.status?.observedGeneration === o.metadata.generation ? ready(o) : undefined;
}

const NS = 'team';
const indexYaml = (name: string, spec: string) => `apiVersion: velodex.dev/v1alpha1\nkind: PackageIndex\nmetadata:\n  name: ${name}\n  namespace: ${NS}\nspec:\n${spec}`;

beforeAll(async () => {
  api = await startKubeApi();
  await kubectl(['apply', '--server-side', '-f', join(REPO, 'crds')]);
  await kubectl(['wait', '--for=condition=Established', 'crd/packageindexes.velodex.dev', 'crd/packageregistries.velodex.dev', '--timeout=60s']);
  await kubectl(['create', 'namespace', NS]);
  await kubectl(['create', 'namespace', 'velodex-system']);
}, 180_000);

afterAll(async () => {
  for (const o of operators) await stopChild(o);
  await api?.stop();
});

describe('the CRDs at kubectl apply time', () => {
  it.each([
    ['a cached index without upstream', '  route: team/a\n  ecosystem: python\n  role: cached\n', 'a cached index needs spec.upstream'],
    ['a virtual index without members', '  route: team/a\n  ecosystem: python\n  role: virtual\n', 'a virtual index needs spec.members'],
    ['an upload token on a cached index', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstream: https://pypi.org/simple/\n  uploadTokenSecretRef: { name: t, key: k }\n', 'spec.uploadTokenSecretRef is only for a hosted index'],
    ['upstream credentials on a hosted index', '  route: team/a\n  ecosystem: python\n  role: hosted\n  upstreamCredentialsSecretRef: { name: hub }\n', 'spec.upstreamCredentialsSecretRef is only for a cached index'],
    ['an uppercase oci route', '  route: Team/Images\n  ecosystem: oci\n  role: hosted\n', 'an oci route is lowercase'],
    ['a route the registry serves itself', '  route: v2/x\n  ecosystem: python\n  role: hosted\n', "the route's first segment is one the registry serves itself"],
    ['a route with a dot segment', '  route: team/../x\n  ecosystem: python\n  role: hosted\n', 'spec.route'],
    ['an unknown ecosystem', '  route: team/a\n  ecosystem: npm\n  role: hosted\n', 'Unsupported value: "npm"'],
  ])('refuses %s', async (_what, spec, message) => {
    const res = await kubectl(['apply', '-f', '-'], indexYaml('bad', spec), true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(message);
  });
});

describe('the operator', () => {
  beforeAll(async () => {
    await kubectl(['create', 'secret', 'generic', 's3', '-n', NS, '--from-literal=access-key=ak-value', '--from-literal=secret-key=sk-value-not-in-config']);
    await kubectl(['create', 'secret', 'generic', 'tokens', '-n', NS, '--from-literal=hosted=token-one-not-in-config']);
    await kubectl(
      ['apply', '-f', '-'],
      [
        `apiVersion: velodex.dev/v1alpha1\nkind: PackageRegistry\nmetadata:\n  name: default\n  namespace: ${NS}\nspec:\n  replicas: 2\n  storage:\n    endpoint: http://minio.storage.svc:9000\n    bucket: velodex\n    credentialsSecretRef: { name: s3 }\n`,
        indexYaml('hosted', '  route: team/hosted\n  ecosystem: python\n  role: hosted\n  uploadTokenSecretRef: { name: tokens, key: hosted }\n'),
        indexYaml('pypi', '  route: team/pypi\n  ecosystem: python\n  role: cached\n  upstream: https://pypi.org/simple/\n'),
        indexYaml('all', '  route: team/all\n  ecosystem: python\n  role: virtual\n  members: [hosted, pypi]\n  uploadTarget: hosted\n'),
      ].join('---\n'),
    );
    // Created later than "hosted": it loses the route.
    await new Promise((r) => setTimeout(r, 1100));
    await kubectl(
      ['apply', '-f', '-'],
      [
        indexYaml('clash', '  route: team/hosted\n  ecosystem: python\n  role: hosted\n'),
        indexYaml('nosecret', '  route: team/nosecret\n  ecosystem: python\n  role: hosted\n  uploadTokenSecretRef: { name: absent, key: token }\n'),
        indexYaml('elsewhere', '  registry: other\n  route: team/elsewhere\n  ecosystem: python\n  role: hosted\n'),
      ].join('---\n'),
    );
    startOperator('operator-a');
  }, 120_000);

  it('renders the registry: ConfigMap without secret values, Deployment, Service and PDB owned by the registry', async () => {
    const cm = await until('the ConfigMap', () => json<Obj>(['get', 'configmap', 'default-config', '-n', NS]).catch(() => undefined));
    const toml = cm.data?.['velodex.toml'] ?? '';
    for (const name of ['"hosted"', '"pypi"', '"all"']) expect(toml).toContain(`name = ${name}`);
    expect(toml).not.toContain('clash');
    expect(toml).toContain('upload_token_file = "/var/run/velodex/secrets/tokens/hosted"');
    for (const secret of ['token-one-not-in-config', 'sk-value-not-in-config', 'ak-value']) expect(toml).not.toContain(secret);
    for (const kind of ['deployment', 'service', 'poddisruptionbudget']) {
      const o = await until(kind, () => json<Obj>(['get', kind, 'default', '-n', NS]).catch(() => undefined));
      expect(o.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'PackageRegistry', name: 'default' });
    }
  });

  it('says why each index is or is not served, in kubectl get', async () => {
    expect(await until('hosted status', () => readyOf('hosted'))).toMatchObject({ status: 'False', reason: 'NoReadyPods' });
    expect(await until('clash status', () => readyOf('clash'))).toMatchObject({ status: 'False', reason: 'RouteConflict', message: 'route "team/hosted" is already served by the older PackageIndex "hosted"' });
    expect(await until('nosecret status', () => readyOf('nosecret'))).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(await until('elsewhere status', () => readyOf('elsewhere'))).toMatchObject({ status: 'False', reason: 'RegistryNotFound' });
    const table = (await kubectl(['get', 'packageindex', '-n', NS])).stdout;
    expect(table.split('\n')[0]).toMatch(/^NAME\s+ROUTE\s+ECOSYSTEM\s+ROLE\s+REGISTRY\s+READY\s+UPSTREAM\s+AGE$/);
    // No pod has reported on the upstream yet.
    expect(table).toMatch(/pypi\s+team\/pypi\s+python\s+cached\s+default\s+False\s+\d+s/);
    const wide = (await kubectl(['get', 'pidx', 'clash', '-n', NS, '-o', 'wide'])).stdout;
    expect(wide.split('\n')[0]).toMatch(/URL\s+REASON\s+MESSAGE$/);
    expect(wide).toMatch(/RouteConflict\s+route "team\/hosted" is already served by the older PackageIndex "hosted"/);
    // kstatus: a spec a person must fix is Stalled.
    await kubectl(['wait', '--for=condition=Stalled', 'pidx/clash', '-n', NS, '--timeout=30s']);
  });

  it('is Degraded (with the reason) or Progressing under the Argo CD health check of docs/gitops.md', async () => {
    expect(await argoHealth('PackageIndex', await json(['get', 'pidx', 'clash', '-n', NS]))).toEqual({
      status: 'Degraded',
      message: 'RouteConflict: route "team/hosted" is already served by the older PackageIndex "hosted"',
    });
    expect(await argoHealth('PackageIndex', await json(['get', 'pidx', 'hosted', '-n', NS]))).toEqual({
      status: 'Progressing',
      message: 'NoReadyPods: PackageRegistry "default" has no ready pods',
    });
    expect((await argoHealth('PackageRegistry', await json(['get', 'packageregistry', 'default', '-n', NS]))).status).toBe('Progressing');
  });

  it('rolls the pods (a new checksum) when a referenced Secret rotates, and applies an index edit', async () => {
    const checksum = async () => (await json<Obj>(['get', 'deployment', 'default', '-n', NS])).spec?.template?.metadata?.annotations?.['velodex.dev/config-checksum'];
    const before = await until('a checksum', checksum);
    await kubectl(['create', 'secret', 'generic', 'tokens', '-n', NS, '--from-literal=hosted=token-two', '--dry-run=client', '-o', 'yaml'], undefined).then((r) => kubectl(['apply', '-f', '-'], r.stdout));
    const after = await until('a new checksum', async () => {
      const c = await checksum();
      return c !== before ? c : undefined;
    });
    expect(after).toMatch(/^[0-9a-f]{64}$/);
    await kubectl(['patch', 'pidx', 'pypi', '-n', NS, '--type=merge', '-p', '{"spec":{"upstreamConcurrency":7}}']);
    await until('the edit in the ConfigMap', async () => ((await json<Obj>(['get', 'configmap', 'default-config', '-n', NS])).data?.['velodex.toml']?.includes('upstream_concurrency = 7') ? true : undefined));
    // Fixing the secret reference makes the index served.
    await kubectl(['create', 'secret', 'generic', 'absent', '-n', NS, '--from-literal=token=t3']);
    expect(await until('nosecret served', async () => ((await readyOf('nosecret'))?.reason === 'NoReadyPods' ? true : undefined))).toBe(true);
  });

  it('elects one leader of two operators; the other takes over when the leader is killed', async () => {
    startOperator('operator-b');
    const holder = async () => (await json<{ spec: { holderIdentity?: string } }>(['get', 'lease', 'velodex-operator', '-n', 'velodex-system'])).spec.holderIdentity;
    expect(await until('a lease holder', holder)).toBe('operator-a');
    await new Promise((r) => setTimeout(r, 3000));
    expect(await holder()).toBe('operator-a');
    operators[0]?.kill('SIGKILL');
    expect(await until('operator-b leading', async () => ((await holder()) === 'operator-b' ? 'operator-b' : undefined), 60_000)).toBe('operator-b');
    // The new leader reconciles: a new index gets its status.
    await kubectl(['apply', '-f', '-'], indexYaml('late', '  route: team/late\n  ecosystem: oci\n  role: hosted\n'));
    expect(await until('late status', () => readyOf('late'))).toMatchObject({ reason: 'NoReadyPods' });
  });
});
