/**
 * The CRDs and the operator against a real kube-apiserver and etcd (no nodes, so no pod ever
 * runs: every served index reports NoReadyPods). Driven with kubectl as a platform team would:
 * invalid specs are refused at apply time with the schema's messages; the operator renders each
 * registry's objects, reports why an index is not served, rolls the pods' checksum when a Secret
 * rotates, and of two operator replicas only the Lease holder writes. It uses only Secrets that
 * opted in (the API server's audit log shows it never asked for the others' data) and runs only
 * the images the platform allows.
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

const ALLOWED_IMAGES = 'ghcr.io/acme/velodex:*, registry.example/velodex@sha256:*';

function startOperator(identity: string): ChildProcess {
  const child = spawn(process.execPath, [join(REPO, 'operator', 'dist', 'main.js')], {
    env: {
      PATH: process.env.PATH,
      KUBECONFIG: api.kubeconfig,
      VELODEX_IMAGE: 'docker.io/velodex/velodex:test',
      VELODEX_ALLOWED_IMAGES: ALLOWED_IMAGES,
      POD_NAMESPACE: 'velodex-system',
      POD_NAME: identity,
      VELODEX_RESYNC_SECONDS: '2',
      VELODEX_OPERATOR_PORT: '0',
    },
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
const OPT_IN = 'velodex.dev/allow-reference';
/** A Secret of the team's namespace; `optIn` adds the label that lets velodex use it. */
const secretYaml = (name: string, data: Record<string, string>, optIn = true) =>
  `apiVersion: v1\nkind: Secret\nmetadata:\n  name: ${name}\n  namespace: ${NS}\n${optIn ? `  labels: { ${OPT_IN}: "true" }\n` : ''}stringData:\n${Object.entries(data)
    .map(([k, v]) => `  ${k}: ${JSON.stringify(v)}\n`)
    .join('')}`;
/** `extra`: fields of the spec; `storage`: more fields of spec.storage, indented by four. */
const registryYaml = (name: string, extra = '', storage = '') =>
  `apiVersion: velodex.dev/v1alpha1\nkind: PackageRegistry\nmetadata:\n  name: ${name}\n  namespace: ${NS}\nspec:\n${extra}  storage:\n    endpoint: http://minio.storage.svc:9000\n    bucket: velodex\n    credentialsSecretRef: { name: s3 }\n${storage}`;

beforeAll(async () => {
  api = await startKubeApi({ auditSecrets: true });
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
    ['both upstream and upstreams', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstream: https://pypi.org/simple/\n  upstreams: [{ url: "https://b.example/simple/" }]\n', 'or spec.upstreams (several, asked in order), not both'],
    ['upstreams on a hosted index', '  route: team/a\n  ecosystem: python\n  role: hosted\n  upstreams: [{ url: "https://b.example/simple/" }]\n', 'spec.upstreams is only for a cached index'],
    ['upstreamCredentialsSecretRef beside upstreams', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstreams: [{ url: "https://b.example/simple/" }]\n  upstreamCredentialsSecretRef: { name: hub }\n', 'with spec.upstreams each upstream has its own hosts and credentialsSecretRef'],
    ['failoverOn404 on the last upstream', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstreams: [{ url: "https://a.example/simple/" }, { url: "https://b.example/simple/", failoverOn404: true }]\n', 'which has none after it to ask'],
    ['one upstream twice', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstreams: [{ url: "https://a.example/simple/" }, { url: "https://a.example/simple/" }]\n', 'Duplicate value'],
    ['an upstream timeout of zero', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstreams: [{ url: "https://a.example/simple/", timeout: 0s }, { url: "https://b.example/simple/" }]\n', 'spec.upstreams timeout must be at least 1s'],
    ['an upstream timeout over 5m', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstreams: [{ url: "https://a.example/simple/", timeout: 5m1s }, { url: "https://b.example/simple/" }]\n', 'spec.upstreams timeout must be at most 5m'],
    ['an upstream timeout of a day in hours', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstreams: [{ url: "https://a.example/simple/", timeout: 24h }, { url: "https://b.example/simple/" }]\n', 'spec.upstreams timeout must be at most 5m'],
    ['an upstream timeout of 301 seconds', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstreams: [{ url: "https://a.example/simple/", timeout: "301" }, { url: "https://b.example/simple/" }]\n', 'spec.upstreams timeout must be at most 5m'],
    ['a virtual index without members', '  route: team/a\n  ecosystem: python\n  role: virtual\n', 'a virtual index needs spec.members'],
    ['an upload token on a cached index', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstream: https://pypi.org/simple/\n  uploadTokenSecretRef: { name: t, key: k }\n', 'spec.uploadTokenSecretRef is only for a hosted index'],
    ['upstream credentials on a hosted index', '  route: team/a\n  ecosystem: python\n  role: hosted\n  upstreamCredentialsSecretRef: { name: hub }\n', 'spec.upstreamCredentialsSecretRef is only for a cached index'],
    ['an uppercase oci route', '  route: Team/Images\n  ecosystem: oci\n  role: hosted\n', 'an oci route is lowercase'],
    ['a route the registry serves itself', '  route: v2/x\n  ecosystem: python\n  role: hosted\n', "the route's first segment is one the registry serves itself"],
    ['a route with a dot segment', '  route: team/../x\n  ecosystem: python\n  role: hosted\n', 'spec.route'],
    ['an unknown ecosystem', '  route: team/a\n  ecosystem: npm\n  role: hosted\n', 'Unsupported value: "npm"'],
    [
      'a webhook URL with user info',
      '  route: team/a\n  ecosystem: python\n  role: hosted\n  webhooks: [{ url: "https://ci:hunter2@ci.example/hook" }]\n',
      'a webhook URL must not carry user info (user:password@host): anyone who may read the PackageIndex would see it; put the whole URL in a Secret',
    ],
    ['a webhook with url and urlSecretRef', '  route: team/a\n  ecosystem: python\n  role: hosted\n  webhooks: [{ url: "https://ci.example/hook", urlSecretRef: { name: h, key: u } }]\n', 'a webhook takes exactly one of url and urlSecretRef'],
    ['a webhook without a URL', '  route: team/a\n  ecosystem: python\n  role: hosted\n  webhooks: [{ events: [upload] }]\n', 'a webhook takes exactly one of url and urlSecretRef'],
    ['retention on a python index', '  route: team/a\n  ecosystem: python\n  role: hosted\n  retention: { untaggedAfter: "7d" }\n', 'spec.retention applies to hosted oci indexes only'],
    [
      'retention on a cached oci index',
      '  route: team/a\n  ecosystem: oci\n  role: cached\n  upstream: https://registry-1.docker.io\n  retention: { keepTags: [{ match: "v*", newest: 3 }] }\n',
      'spec.retention applies to hosted oci indexes only',
    ],
    ['keep_tags newest = 0', '  route: team/a\n  ecosystem: oci\n  role: hosted\n  retention: { keepTags: [{ match: "v*", newest: 0 }] }\n', 'spec.retention.keepTags[0].newest'],
    ['a keep_tags rule without newest', '  route: team/a\n  ecosystem: oci\n  role: hosted\n  retention: { keepTags: [{ match: "v*" }] }\n', 'spec.retention.keepTags[0].newest: Required value'],
    ['an untaggedAfter that is no duration', '  route: team/a\n  ecosystem: oci\n  role: hosted\n  retention: { untaggedAfter: "a week" }\n', 'spec.retention.untaggedAfter'],
    ['an untaggedAfter of zero', '  route: team/a\n  ecosystem: oci\n  role: hosted\n  retention: { untaggedAfter: "0s" }\n', 'spec.retention.untaggedAfter must be at least 1s'],
    ['a quota on a cached index', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstream: https://pypi.org/simple/\n  quotaBytes: 10Gi\n', 'spec.quotaBytes is only for a hosted index'],
    ['a cache budget on a hosted index', '  route: team/a\n  ecosystem: oci\n  role: hosted\n  maxBytes: 10Gi\n', 'spec.maxBytes is only for a cached index'],
    ['evictUnusedAfter on a virtual index', '  route: team/a\n  ecosystem: python\n  role: virtual\n  members: [b]\n  evictUnusedAfter: 30d\n', 'spec.evictUnusedAfter is only for a cached index'],
    ['a quota of "0"', '  route: team/a\n  ecosystem: python\n  role: hosted\n  quotaBytes: "0"\n', 'spec.quotaBytes must be more than 0 bytes'],
    ['a quota of "0.0Gi"', '  route: team/a\n  ecosystem: python\n  role: hosted\n  quotaBytes: "0.0Gi"\n', 'spec.quotaBytes must be more than 0 bytes'],
    ['a quota of 0 bytes as an integer', '  route: team/a\n  ecosystem: python\n  role: hosted\n  quotaBytes: 0\n', 'spec.quotaBytes'],
    ['a quota of -5', '  route: team/a\n  ecosystem: python\n  role: hosted\n  quotaBytes: -5\n', 'spec.quotaBytes'],
    ['a quota of "-5"', '  route: team/a\n  ecosystem: python\n  role: hosted\n  quotaBytes: "-5"\n', 'spec.quotaBytes'],
    ['a budget of "10 parsecs"', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstream: https://pypi.org/simple/\n  maxBytes: 10 parsecs\n', 'spec.maxBytes'],
    ['a budget in a unit the grammar lacks', '  route: team/a\n  ecosystem: oci\n  role: cached\n  upstream: https://registry-1.docker.io\n  maxBytes: 10Pi\n', 'spec.maxBytes'],
    ['an evictUnusedAfter that is no duration', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstream: https://pypi.org/simple/\n  evictUnusedAfter: a month\n', 'spec.evictUnusedAfter'],
    ['an evictUnusedAfter of zero', '  route: team/a\n  ecosystem: python\n  role: cached\n  upstream: https://pypi.org/simple/\n  evictUnusedAfter: "0"\n', 'spec.evictUnusedAfter must be at least 1s'],
    [
      'an upload token on a virtual index',
      '  route: team/a\n  ecosystem: python\n  role: virtual\n  members: [b]\n  tokens: [{ name: ci, secretRef: { name: t, key: k }, scopes: [read, upload] }]\n',
      "spec.tokens: the upload and delete scopes are only for a hosted index (a virtual index's writes land in its upload target, whose tokens apply",
    ],
    ['a delete token on a cached index', '  route: team/a\n  ecosystem: oci\n  role: cached\n  upstream: https://registry-1.docker.io\n  tokens: [{ name: ci, secretRef: { name: t, key: k }, scopes: [delete] }]\n', 'spec.tokens: the upload and delete scopes are only for a hosted index'],
    ['two tokens of one name', '  route: team/a\n  ecosystem: python\n  role: hosted\n  tokens: [{ name: ci, secretRef: { name: t, key: a }, scopes: [read] }, { name: ci, secretRef: { name: t, key: b }, scopes: [upload] }]\n', 'Duplicate value'],
    ['a token name with a slash', '  route: team/a\n  ecosystem: python\n  role: hosted\n  tokens: [{ name: ci/release, secretRef: { name: t, key: k }, scopes: [upload] }]\n', 'spec.tokens[0].name'],
    ['a token without scopes', '  route: team/a\n  ecosystem: python\n  role: hosted\n  tokens: [{ name: ci, secretRef: { name: t, key: k }, scopes: [] }]\n', 'spec.tokens[0].scopes'],
    ['a token with an unknown scope', '  route: team/a\n  ecosystem: python\n  role: hosted\n  tokens: [{ name: ci, secretRef: { name: t, key: k }, scopes: [admin] }]\n', 'Unsupported value: "admin"'],
    ['a token without a secretRef', '  route: team/a\n  ecosystem: python\n  role: hosted\n  tokens: [{ name: ci, scopes: [upload] }]\n', 'spec.tokens[0].secretRef: Required value'],
    ['a token expiry that is no date', '  route: team/a\n  ecosystem: python\n  role: hosted\n  tokens: [{ name: ci, secretRef: { name: t, key: k }, scopes: [read], expires: "next June" }]\n', 'spec.tokens[0].expires'],
    ['a token expiry without an offset', '  route: team/a\n  ecosystem: python\n  role: hosted\n  tokens: [{ name: ci, secretRef: { name: t, key: k }, scopes: [read], expires: "2027-06-30T00:00:00" }]\n', 'spec.tokens[0].expires'],
    [
      'a ServiceAccount that may upload to a virtual index',
      '  route: team/a\n  ecosystem: python\n  role: virtual\n  members: [b]\n  access: { serviceAccounts: [{ name: ci, scopes: [read, upload] }] }\n',
      "spec.access.serviceAccounts: the upload and delete scopes are only for a hosted index (a virtual index's writes land in its upload target, whose rules apply",
    ],
    ['a ServiceAccount that may delete on a cached index', '  route: team/a\n  ecosystem: oci\n  role: cached\n  upstream: https://registry-1.docker.io\n  access: { serviceAccounts: [{ name: "*", scopes: [delete] }] }\n', 'spec.access.serviceAccounts: the upload and delete scopes are only for a hosted index'],
    ['a ServiceAccount name Kubernetes would not take', '  route: team/a\n  ecosystem: python\n  role: hosted\n  access: { serviceAccounts: [{ name: CI, scopes: [upload] }] }\n', 'spec.access.serviceAccounts[0].name'],
    ['a ServiceAccount namespace that is no namespace name', '  route: team/a\n  ecosystem: python\n  role: hosted\n  access: { serviceAccounts: [{ namespace: "ci/prod", name: builder, scopes: [upload] }] }\n', 'spec.access.serviceAccounts[0].namespace'],
    ['trusted publishers on a cached index', '  route: team/a\n  ecosystem: oci\n  role: cached\n  upstream: https://registry-1.docker.io\n  access: { trustedPublishers: [{ name: ci, issuer: "https://token.actions.githubusercontent.com", repository: acme/w }] }\n', 'spec.access.trustedPublishers is only for a hosted index'],
    ['a trusted publisher that pins no repository', '  route: team/a\n  ecosystem: python\n  role: hosted\n  access: { trustedPublishers: [{ name: ci, issuer: "https://token.actions.githubusercontent.com", environment: pypi }] }\n', 'a trusted publisher names a repository (GitHub Actions) or a projectPath (GitLab CI)'],
    ['a trusted publisher workflow without its repository', '  route: team/a\n  ecosystem: python\n  role: hosted\n  access: { trustedPublishers: [{ name: ci, issuer: "https://gitlab.example.com", projectPath: acme/w, workflow: release.yml }] }\n', "a trusted publisher's workflow needs its repository"],
    ['a trusted publisher issuer over plain http', '  route: team/a\n  ecosystem: python\n  role: hosted\n  access: { trustedPublishers: [{ name: ci, issuer: "http://issuer.internal", repository: acme/w }] }\n', 'spec.access.trustedPublishers[0].issuer'],
    ['two trusted publishers of one name', '  route: team/a\n  ecosystem: python\n  role: hosted\n  access: { trustedPublishers: [{ name: ci, issuer: "https://i.example", repository: acme/w }, { name: ci, issuer: "https://i.example", repository: acme/v }] }\n', 'Duplicate value'],
    ['a ServiceAccount rule without scopes', '  route: team/a\n  ecosystem: python\n  role: hosted\n  access: { serviceAccounts: [{ name: builder, scopes: [] }] }\n', 'spec.access.serviceAccounts[0].scopes'],
  ])('refuses %s', async (_what, spec, message) => {
    const res = await kubectl(['apply', '-f', '-'], indexYaml('bad', spec), true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(message);
  });

  it('accepts retention on a hosted oci index and a registry schedule, and refuses a schedule that is no duration', async () => {
    const good = indexYaml('kept', '  route: team/kept\n  ecosystem: oci\n  role: hosted\n  retention:\n    untaggedAfter: 14d\n    keepTags: [{ match: "v*", newest: 10 }, { match: "pr-*", newest: 3 }]\n');
    await kubectl(['apply', '--dry-run=server', '-f', '-'], good);
    await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('scheduled', '  retention: { every: 6h }\n'));
    const res = await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('scheduled', '  retention: { every: hourly }\n'), true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('spec.retention.every');
  });

  it.each([
    ['a quota in Kubernetes quantity spelling', '  route: team/q\n  ecosystem: python\n  role: hosted\n  quotaBytes: 10Gi\n'],
    ['a quota in bytes as an integer', '  route: team/q\n  ecosystem: oci\n  role: hosted\n  quotaBytes: 1048576\n'],
    ['a quota in bytes as a string', '  route: team/q\n  ecosystem: python\n  role: hosted\n  quotaBytes: "1048576"\n'],
    ['a budget with a fraction', '  route: team/q\n  ecosystem: python\n  role: cached\n  upstream: https://pypi.org/simple/\n  maxBytes: 1.5G\n  evictUnusedAfter: 30d\n'],
    ['a budget in KiB-style units and eviction after seconds', '  route: team/q\n  ecosystem: oci\n  role: cached\n  upstream: https://registry-1.docker.io\n  maxBytes: 500MiB\n  evictUnusedAfter: "86400"\n'],
    [
      'named tokens: write scopes on a hosted index, read on a virtual one, a date or a date-time with an offset',
      '  route: team/q\n  ecosystem: python\n  role: hosted\n  tokens:\n    - { name: ci-release, secretRef: { name: t, key: k }, scopes: [upload, delete], projects: ["team-*", libfoo], expires: "2027-06-30T00:00:00Z" }\n    - { name: readers.v2, secretRef: { name: t, key: r }, scopes: [read], expires: "2027-06-30" }\n    - { name: dev_1, secretRef: { name: t, key: d }, scopes: [read, upload], expires: "2027-06-30T08:00:00.5+02:00" }\n',
    ],
    ['a read token on a virtual index', '  route: team/q\n  ecosystem: python\n  role: virtual\n  members: [b]\n  tokens: [{ name: ci, secretRef: { name: t, key: k }, scopes: [read] }]\n'],
    [
      'several upstreams, each with its own credentials, hosts, failoverOn404 and timeout',
      '  route: team/q\n  ecosystem: oci\n  role: cached\n  upstreams:\n    - { url: "https://mirror.corp.example", credentialsSecretRef: { name: corp }, hosts: [auth.corp.example], failoverOn404: true, timeout: 5s }\n    - { url: "https://registry-1.docker.io", credentialsSecretRef: { name: hub, passwordKey: token } }\n',
    ],
    ['an upstream timeout of exactly 5m, spelt 4m60s', '  route: team/q\n  ecosystem: oci\n  role: cached\n  upstreams: [{ url: "https://a.example", timeout: 4m60s }, { url: "https://b.example", timeout: "300" }]\n'],
  ])('accepts %s', async (_what, spec) => {
    await kubectl(['apply', '--dry-run=server', '-f', '-'], indexYaml('sized', spec));
  });

  it.each([
    ['a gc schedule that is no duration', '  gc: { every: hourly }\n', 'spec.gc.every'],
    ['a gc schedule of zero', '  gc: { every: "0h0m" }\n', 'spec.gc.every must be at least 1s'],
    ['a gc grace of zero', '  gc: { grace: "0s" }\n', 'spec.gc.grace must be at least 1s'],
    ['a gc lease of zero seconds', '  gc: { lease: "0" }\n', 'spec.gc.lease must be at least 1s'],
    ['a gc grace given as a number', '  gc: { grace: 86400 }\n', 'spec.gc.grace'],
    ['gc.enabled that is no boolean', '  gc: { enabled: sometimes }\n', 'spec.gc.enabled'],
    ['an eviction interval of zero', '  gc: { evictEvery: "0m" }\n', 'spec.gc.evictEvery must be at least 1s'],
    ['a cpu share of zero', '  gc: { cpuShare: 0 }\n', 'spec.gc.cpuShare'],
    ['a cpu share above a whole core', '  gc: { cpuShare: 1.5 }\n', 'spec.gc.cpuShare'],
    ['both an Ingress and a gatewayRoute', '  ingress: { host: registry.example.com }\n  gatewayRoute: { host: registry.example.com, parentRefs: [{ name: edge }] }\n', 'give spec.ingress or spec.gatewayRoute, not both'],
    ['a gatewayRoute host in upper case', '  gatewayRoute: { host: Registry.Example.com, parentRefs: [{ name: edge }] }\n', 'spec.gatewayRoute.host'],
    ['a gatewayRoute host with a scheme', '  gatewayRoute: { host: "https://registry.example.com", parentRefs: [{ name: edge }] }\n', 'spec.gatewayRoute.host'],
    ['a gatewayRoute host of one label', '  gatewayRoute: { host: registry, parentRefs: [{ name: edge }] }\n', 'spec.gatewayRoute.host'],
    ['a gatewayRoute without parentRefs', '  gatewayRoute: { host: registry.example.com }\n', 'spec.gatewayRoute.parentRefs: Required value'],
    ['a gatewayRoute with no Gateway', '  gatewayRoute: { host: registry.example.com, parentRefs: [] }\n', 'spec.gatewayRoute.parentRefs'],
    ['a Gateway namespace that is no namespace name', '  gatewayRoute: { host: registry.example.com, parentRefs: [{ name: edge, namespace: Infra/Edge }] }\n', 'spec.gatewayRoute.parentRefs[0].namespace'],
    ['a Gateway listener port out of range', '  gatewayRoute: { host: registry.example.com, parentRefs: [{ name: edge, port: 70000 }] }\n', 'spec.gatewayRoute.parentRefs[0].port'],
    ['a gatewayRoute scheme other than https or http', '  gatewayRoute: { host: registry.example.com, parentRefs: [{ name: edge }], scheme: ftp }\n', 'Unsupported value: "ftp"'],
    ['a certManager without its issuer', '  tls: { secretName: registry-cert, certManager: { dnsNames: [registry.example.com] } }\n', 'spec.tls.certManager.issuerRef: Required value'],
    ['a certManager issuer of another kind', '  tls: { secretName: registry-cert, certManager: { issuerRef: { name: corp-ca, kind: VaultIssuer } } }\n', 'Unsupported value: "VaultIssuer"'],
    ['a certManager dnsName in upper case', '  tls: { secretName: registry-cert, certManager: { issuerRef: { name: corp-ca }, dnsNames: [Registry.Example.com] } }\n', 'spec.tls.certManager.dnsNames[0]'],
    ['a certManager with an empty dnsNames', '  tls: { secretName: registry-cert, certManager: { issuerRef: { name: corp-ca }, dnsNames: [] } }\n', 'spec.tls.certManager.dnsNames'],
  ])('refuses a registry with %s', async (_what, extra, message) => {
    const res = await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('collected', extra), true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(message);
  });

  it('accepts a gatewayRoute and a certManager with every field, or only the required ones', async () => {
    await kubectl(
      ['apply', '--dry-run=server', '-f', '-'],
      registryYaml(
        'exposed',
        '  tls: { secretName: registry-cert, certManager: { issuerRef: { name: corp-ca, kind: ClusterIssuer }, dnsNames: [registry.example.com, "*.registry.example.com", exposed.team.svc] } }\n' +
          '  gatewayRoute: { host: registry.example.com, scheme: http, parentRefs: [{ name: edge, namespace: infra, sectionName: https, port: 443 }, { name: inside }], annotations: { team: platform } }\n',
      ),
    );
    await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('exposed', '  tls: { secretName: registry-cert, certManager: { issuerRef: { name: corp-ca } } }\n  gatewayRoute: { host: registry.example.com, parentRefs: [{ name: edge }] }\n'));
  });

  it('refuses storage.peerCache beside readCacheMs, saying which to remove, and accepts either alone (readCacheMs 0 is off)', async () => {
    const both = await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('peers', '', '    peerCache: true\n    readCacheMs: 2000\n'), true);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain('spec.storage.peerCache cannot be combined with spec.storage.readCacheMs: remove readCacheMs');
    const notBoolean = await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('peers', '', '    peerCache: sometimes\n'), true);
    expect(notBoolean.code).not.toBe(0);
    expect(notBoolean.stderr).toContain('spec.storage.peerCache');
    for (const storage of ['    peerCache: true\n', '    readCacheMs: 2000\n', '    peerCache: true\n    readCacheMs: 0\n', '    peerCache: false\n    readCacheMs: 2000\n']) {
      await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('peers', '', storage));
    }
  });

  it('accepts gc settings on a registry: every field, or only some, durations with units or in seconds', async () => {
    await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('collected', '  gc: { enabled: true, every: 6h, grace: 2d, lease: 90s, evictEvery: 30s, cpuShare: 0.25 }\n'));
    await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('collected', '  gc: { enabled: false, grace: "172800" }\n'));
  });
});

describe('spec.nodeMirror at kubectl apply time', () => {
  it('accepts registries by host, with a port, an IP address', async () => {
    await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('mirror', '  nodeMirror:\n    registries: [{ registry: docker.io, index: hub }, { registry: "10.0.0.5:5000", index: lab }, { registry: registry.k8s.io, index: k8s }]\n'));
  });

  it.each([
    ['a registry with a scheme', '[{ registry: "https://ghcr.io", index: ghcr }]', 'spec.nodeMirror.registries[0].registry'],
    ['a registry with a path', '[{ registry: docker.io/library, index: hub }]', 'spec.nodeMirror.registries[0].registry'],
    ['a registry in upper case', '[{ registry: GHCR.IO, index: ghcr }]', 'spec.nodeMirror.registries[0].registry'],
    ["Docker Hub's API host", '[{ registry: registry-1.docker.io, index: hub }]', 'write Docker Hub as docker.io'],
    ['a registry twice', '[{ registry: docker.io, index: hub }, { registry: docker.io, index: hub2 }]', 'Duplicate value'],
    ['an index for two registries', '[{ registry: docker.io, index: hub }, { registry: ghcr.io, index: hub }]', 'an index serves one registry'],
    ['an entry without its index', '[{ registry: docker.io }]', 'spec.nodeMirror.registries[0].index: Required value'],
    ['no entries', '[]', 'spec.nodeMirror.registries'],
  ])('refuses %s', async (_what, registries, message) => {
    const res = await kubectl(['apply', '--dry-run=server', '-f', '-'], registryYaml('mirror', `  nodeMirror:\n    registries: ${registries}\n`), true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(message);
  });
});

describe('the operator', () => {
  beforeAll(async () => {
    await kubectl(
      ['apply', '-f', '-'],
      [secretYaml('s3', { 'access-key': 'ak-value', 'secret-key': 'sk-value-not-in-config' }), secretYaml('tokens', { hosted: 'token-one-not-in-config' })].join('---\n'),
    );
    await kubectl(
      ['apply', '-f', '-'],
      [
        registryYaml('default', '  replicas: 2\n'),
        indexYaml('hosted', '  route: team/hosted\n  ecosystem: python\n  role: hosted\n  uploadTokenSecretRef: { name: tokens, key: hosted }\n  access: { serviceAccounts: [{ name: builder, scopes: [upload] }, { namespace: ci, name: "*", scopes: [read] }] }\n'),
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
    // ServiceAccount rules: [kubernetes] and the rules, the namespace defaulted to the index's own;
    // the pods run as the registry's own ServiceAccount and mount its token.
    expect(toml).toMatch(/\[kubernetes\]\naudience = "velodex"\n/);
    expect(toml).toContain(`[[index.service_account]]\nnamespace = "${NS}"\nname = "builder"\nscopes = [ "upload" ]`);
    expect(toml).toContain('[[index.service_account]]\nnamespace = "ci"\nname = "*"\nscopes = [ "read" ]');
    const account = await until('the ServiceAccount', () => json<Obj & { automountServiceAccountToken?: boolean }>(['get', 'serviceaccount', 'velodex-default', '-n', NS]).catch(() => undefined));
    expect(account.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'PackageRegistry', name: 'default' });
    expect(account.automountServiceAccountToken).toBe(false);
    const pod = (await json<{ spec: { template: { spec: { serviceAccountName?: string; automountServiceAccountToken?: boolean } } } }>(['get', 'deployment', 'default', '-n', NS])).spec.template.spec;
    expect(pod).toMatchObject({ serviceAccountName: 'velodex-default', automountServiceAccountToken: true });
  });

  it('adds an autoscaler, a NetworkPolicy and an Ingress when the registry asks for them, leaves the replica count to the autoscaler, and deletes all three when it no longer asks', async () => {
    await kubectl(
      ['apply', '-f', '-'],
      registryYaml(
        'scaled',
        '  autoscaling: { minReplicas: 2, maxReplicas: 6 }\n  networkPolicy: { from: [{ podSelector: { matchLabels: { role: builder } } }] }\n' +
          '  ingress: { host: registry.example.com, className: nginx, tlsSecretName: registry-tls, annotations: { cert-manager.io/cluster-issuer: letsencrypt } }\n',
      ),
    );
    const hpa = await until('the autoscaler', () => json<{ spec: { minReplicas: number; maxReplicas: number; scaleTargetRef: { name: string } } }>(['get', 'hpa', 'scaled', '-n', NS]).catch(() => undefined));
    expect(hpa.spec).toMatchObject({ minReplicas: 2, maxReplicas: 6, scaleTargetRef: { name: 'scaled' } });
    const policy = await until('the NetworkPolicy', () => json<{ spec: { ingress: unknown[] } }>(['get', 'networkpolicy', 'scaled', '-n', NS]).catch(() => undefined));
    expect(policy.spec.ingress).toEqual([{ from: [{ podSelector: { matchLabels: { role: 'builder' } } }], ports: [{ protocol: 'TCP', port: 'http' }] }]);
    // The Ingress sends the host to the Service, with the TLS Secret and the annotations given.
    const ing = await until('the Ingress', () => json<{ metadata: { annotations: Record<string, string> }; spec: Record<string, unknown> }>(['get', 'ingress', 'scaled', '-n', NS]).catch(() => undefined));
    expect(ing.metadata.annotations).toMatchObject({ 'cert-manager.io/cluster-issuer': 'letsencrypt' });
    expect(ing.spec).toEqual({
      ingressClassName: 'nginx',
      tls: [{ hosts: ['registry.example.com'], secretName: 'registry-tls' }],
      rules: [{ host: 'registry.example.com', http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 'scaled', port: { name: 'http' } } } }] } }],
    });
    // Clients are told the external address: in the registry's status and in its config (/+api).
    expect(await until('status.url', async () => (await kubectl(['get', 'packageregistry', 'scaled', '-n', NS, '-o', 'jsonpath={.status.url}'])).stdout || undefined)).toBe('https://registry.example.com');
    expect((await kubectl(['get', 'configmap', 'scaled-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout).toContain('external_urls = [ "https://registry.example.com" ]');
    // The operator's apply carries no replica count: what the autoscaler sets stays, through a
    // reconcile that applied the Deployment again (seen in the autoscaler it applied with it).
    await kubectl(['scale', 'deployment', 'scaled', '-n', NS, '--replicas=5']);
    await kubectl(['patch', 'packageregistry', 'scaled', '-n', NS, '--type=merge', '-p', '{"spec":{"autoscaling":{"maxReplicas":7}}}']);
    await until('the next reconcile', async () => ((await json<{ spec: { maxReplicas: number } }>(['get', 'hpa', 'scaled', '-n', NS])).spec.maxReplicas === 7 ? true : undefined));
    expect((await kubectl(['get', 'deployment', 'scaled', '-n', NS, '-o', 'jsonpath={.spec.replicas}'])).stdout).toBe('5');
    const spec = (await kubectl(['get', 'deployment', 'scaled', '-n', NS, '-o', 'jsonpath={.spec.template.spec.topologySpreadConstraints[*].topologyKey} {.spec.template.spec.volumes[?(@.name=="data")].emptyDir.sizeLimit}'])).stdout;
    expect(spec).toBe('kubernetes.io/hostname topology.kubernetes.io/zone 10Gi');
    await kubectl(['patch', 'packageregistry', 'scaled', '-n', NS, '--type=json', '-p', '[{"op":"remove","path":"/spec/autoscaling"},{"op":"remove","path":"/spec/networkPolicy"},{"op":"remove","path":"/spec/ingress"}]']);
    await until('all three gone', async () => {
      const left = (await kubectl(['get', 'hpa,networkpolicy,ingress', '-n', NS, '--field-selector', 'metadata.name=scaled', '-o', 'name'])).stdout.trim();
      return left === '' ? true : undefined;
    });
    await kubectl(['delete', 'packageregistry', 'scaled', '-n', NS]);
  });

  it("with storage.peerCache, tells the pods their IP as VELODEX_PEER_HOST and opens the NetworkPolicy between them on any TCP port; both go when it is off", async () => {
    type Env = { name: string; value?: string; valueFrom?: unknown }[];
    type Rules = { ingress: unknown[]; egress: unknown[] };
    const networkPolicy = '  networkPolicy: { from: [{ podSelector: { matchLabels: { role: builder } } }], egress: [{ ipBlock: { cidr: 10.0.0.0/8 } }] }\n';
    await kubectl(['apply', '-f', '-'], registryYaml('peers', networkPolicy, '    peerCache: true\n'));
    const ownPods = [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'velodex', 'app.kubernetes.io/instance': 'peers' } } }];
    const builders = { from: [{ podSelector: { matchLabels: { role: 'builder' } } }], ports: [{ protocol: 'TCP', port: 'http' }] };
    const dns = { to: [{ namespaceSelector: {} }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] };
    const policy = await until('the NetworkPolicy', () => json<{ spec: Rules }>(['get', 'networkpolicy', 'peers', '-n', NS]).catch(() => undefined));
    expect(policy.spec.ingress).toEqual([builders, { from: ownPods, ports: [{ protocol: 'TCP' }] }]);
    expect(policy.spec.egress).toEqual([dns, { to: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }, { to: ownPods, ports: [{ protocol: 'TCP' }] }]);
    const envOf = async () => (await json<{ spec: { template: { spec: { containers: { env: Env }[] } } } }>(['get', 'deployment', 'peers', '-n', NS])).spec.template.spec.containers[0]?.env ?? [];
    expect(await envOf()).toContainEqual({ name: 'VELODEX_PEER_HOST', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } });
    expect((await kubectl(['get', 'configmap', 'peers-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout).toContain('peer_cache = true');
    await kubectl(['patch', 'packageregistry', 'peers', '-n', NS, '--type=merge', '-p', '{"spec":{"storage":{"peerCache":false}}}']);
    const closed = await until('the rule between the pods gone', async () => {
      const p = await json<{ spec: Rules }>(['get', 'networkpolicy', 'peers', '-n', NS]);
      return p.spec.ingress.length === 1 ? p : undefined;
    });
    expect(closed.spec).toMatchObject({ ingress: [builders], egress: [dns, { to: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }] });
    expect((await envOf()).map((e) => e.name)).not.toContain('VELODEX_PEER_HOST');
    expect((await kubectl(['get', 'configmap', 'peers-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout).not.toContain('peer_cache');
    await kubectl(['delete', 'packageregistry', 'peers', '-n', NS]);
  });

  it('refuses an Ingress host that is not a lowercase DNS name at apply time', async () => {
    for (const host of ['Registry.Example.com', 'registry', 'https://registry.example.com']) {
      const res = await kubectl(['apply', '-f', '-'], registryYaml('badhost', `  ingress: { host: "${host}" }\n`), true);
      expect(res.code, host).not.toBe(0);
      expect(res.stderr).toContain('spec.ingress.host');
    }
  });

  it('refuses an autoscaler whose minimum passes its maximum at apply time', async () => {
    const res = await kubectl(['apply', '-f', '-'], registryYaml('badscale', '  autoscaling: { minReplicas: 5, maxReplicas: 2 }\n'), true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain('spec.autoscaling.minReplicas must not exceed maxReplicas');
  });

  it("exposes a registry through an HTTPRoute and requests its certificate from cert-manager: says what to install while their CRDs are missing, applies both once they are, and deletes both with their fields", async () => {
    const condition = async (name: string, type: string) => {
      const o = await json<Obj>(['get', 'packageregistry', name, '-n', NS]);
      return o.status?.observedGeneration === o.metadata.generation ? o.status?.conditions?.find((c) => c.type === type) : undefined;
    };
    const untilReason = (name: string, type: string, reason: string) => until(`${name} ${type} ${reason}`, async () => ((await condition(name, type))?.reason === reason ? condition(name, type) : undefined));
    const url = async (name: string) => (await kubectl(['get', 'packageregistry', name, '-n', NS, '-o', 'jsonpath={.status.url}'])).stdout;
    const route = '  gatewayRoute: { host: registry.example.com, parentRefs: [{ name: shared, namespace: infra, sectionName: https }] }\n';
    const issued = '  tls: { secretName: issued-cert, certManager: { issuerRef: { name: corp-ca, kind: ClusterIssuer } } }\n';
    // A cluster with a part of the Gateway API (its GatewayClass, no HTTPRoute): the group is
    // served, the kind is not, which is where a delete through discovery would throw.
    await kubectl(['apply', '--server-side', '-f', join(tool('gateway-api-crds'), 'gateway.networking.k8s.io_gatewayclasses.yaml')]);
    await kubectl(['wait', '--for=condition=Established', 'crd/gatewayclasses.gateway.networking.k8s.io', '--timeout=60s']);
    await kubectl(['apply', '-f', '-'], [registryYaml('routed', route), registryYaml('issued', issued)].join('---\n'));

    // No HTTPRoute yet: the GatewayRoute condition says what to install, and the rest of the
    // registry is reconciled, its clients told the external address all the same.
    const noRoute = await untilReason('routed', 'GatewayRoute', 'GatewayAPIMissing');
    expect(noRoute?.status).toBe('False');
    expect(noRoute?.message).toContain('this cluster does not serve HTTPRoute (gateway.networking.k8s.io/v1), so registry.example.com does not reach the registry');
    expect(noRoute?.message).toContain("install the Gateway API's CRDs (standard channel) and a Gateway controller, or expose the registry with spec.ingress instead");
    expect(await condition('routed', 'Ready')).toMatchObject({ status: 'False', reason: 'NoReadyPods' });
    for (const kind of ['deployment', 'service']) expect((await kubectl(['get', kind, 'routed', '-n', NS, '-o', 'name'])).stdout.trim()).toBe(`${kind === 'deployment' ? 'deployment.apps' : kind}/routed`);
    expect(await url('routed')).toBe('https://registry.example.com');
    expect((await kubectl(['get', 'configmap', 'routed-config', '-n', NS, '-o', 'jsonpath={.data.velodex\\.toml}'])).stdout).toContain('external_urls = [ "https://registry.example.com" ]');

    // No cert-manager CRDs: no Certificate; the registry waits for its Secret, says who would fill
    // it, and is Stalled: nothing will, until a person installs cert-manager.
    const noCert = await untilReason('issued', 'Certificate', 'CertManagerMissing');
    expect(noCert?.status).toBe('False');
    expect(noCert?.message).toBe(
      'this cluster does not serve Certificate (cert-manager.io/v1), so no certificate is requested: install cert-manager, or drop spec.tls.certManager and create the kubernetes.io/tls Secret "issued-cert" yourself, labelled velodex.dev/allow-reference=true',
    );
    expect(await condition('issued', 'Ready')).toMatchObject({
      status: 'False',
      reason: 'CertificatePending',
      message: `PackageRegistry "issued" spec.tls.secretName: Secret "issued-cert" does not exist yet; cert-manager writes it once it has issued Certificate "issued" (the registry's Certificate condition says how that goes)`,
    });
    expect((await condition('issued', 'Stalled'))?.status).toBe('True');

    // The route dropped while the API server knows no HTTPRoute: nothing to delete, and the
    // reconcile goes on to the end (the address is the Service's again, the condition gone).
    // cert-manager's group is not served at all: its Certificate, never wanted, is not deleted either.
    await kubectl(['patch', 'packageregistry', 'routed', '-n', NS, '--type=json', '-p', '[{"op":"remove","path":"/spec/gatewayRoute"}]']);
    expect(await until('the in-cluster address', async () => ((await url('routed')) === 'http://routed.team.svc' ? true : undefined))).toBe(true);
    const afterDrop = await json<Obj>(['get', 'packageregistry', 'routed', '-n', NS]);
    expect(afterDrop.status?.conditions?.map((c) => c.type)).toEqual(['Ready', 'Reconciling', 'Stalled']);
    await kubectl(['apply', '-f', '-'], registryYaml('routed', route));

    // The CRDs installed part-way, as a platform team adds them to a running cluster: the next
    // reconcile applies both objects, which the API server validates against the real schemas.
    await kubectl(['apply', '--server-side', '-f', tool('gateway-api-crds'), '-f', tool('cert-manager-crds')]);
    await kubectl(['wait', '--for=condition=Established', 'crd/httproutes.gateway.networking.k8s.io', 'crd/certificates.cert-manager.io', '--timeout=60s']);
    type Extension = { metadata: { ownerReferences?: { kind: string; name: string }[] }; spec: Record<string, unknown> };
    const httpRoute = await until('the HTTPRoute', () => json<Extension>(['get', 'httproute', 'routed', '-n', NS]).catch(() => undefined));
    expect(httpRoute.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'PackageRegistry', name: 'routed' });
    expect(httpRoute.spec).toMatchObject({
      parentRefs: [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'shared', namespace: 'infra', sectionName: 'https' }],
      hostnames: ['registry.example.com'],
      rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/' } }], backendRefs: [{ group: '', kind: 'Service', name: 'routed', port: 80 }] }],
    });
    expect((await untilReason('routed', 'GatewayRoute', 'Applied'))?.message).toBe('HTTPRoute "routed" sends registry.example.com to Service "routed" port 80 through Gateway infra/shared/https');
    expect(await url('routed')).toBe('https://registry.example.com');

    const certificate = await until('the Certificate', () => json<Extension>(['get', 'certificate', 'issued', '-n', NS]).catch(() => undefined));
    expect(certificate.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'PackageRegistry', name: 'issued' });
    expect(certificate.spec).toEqual({
      secretName: 'issued-cert',
      secretTemplate: { labels: { [OPT_IN]: 'true' } },
      issuerRef: { group: 'cert-manager.io', kind: 'ClusterIssuer', name: 'corp-ca' },
      dnsNames: ['issued', 'issued.team', 'issued.team.svc', 'issued.team.svc.cluster.local'],
    });
    expect((await untilReason('issued', 'Certificate', 'Requested'))?.status).toBe('Unknown');
    // Now the wait ends by itself: Reconciling, not Stalled (Argo CD: Progressing, not Degraded).
    expect(await condition('issued', 'Reconciling')).toMatchObject({ status: 'True', reason: 'CertificatePending' });
    expect((await condition('issued', 'Stalled'))?.status).toBe('False');
    expect((await argoHealth('PackageRegistry', await json(['get', 'packageregistry', 'issued', '-n', NS]))).status).toBe('Progressing');

    // No cert-manager runs here: the suite writes what it would. First its verdict on an issuer
    // that does not exist, which the registry passes on.
    const certStatus = (status: object) => kubectl(['patch', 'certificate', 'issued', '-n', NS, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
    await certStatus({ conditions: [{ type: 'Ready', status: 'False', reason: 'DoesNotExist', message: 'Referenced "ClusterIssuer" not found: clusterissuer.cert-manager.io "corp-ca" not found' }] });
    expect((await untilReason('issued', 'Certificate', 'NotIssued'))?.message).toBe(
      'Certificate "issued" from ClusterIssuer "corp-ca" is not issued: DoesNotExist: Referenced "ClusterIssuer" not found: clusterissuer.cert-manager.io "corp-ca" not found (kubectl describe certificate issued -n team)',
    );
    // Then, issued: the Secret with the template's label, and Ready. The registry runs on the
    // Secret, over HTTPS on 443.
    await kubectl(
      ['apply', '-f', '-'],
      `apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\nmetadata:\n  name: issued-cert\n  namespace: ${NS}\n  labels: { ${OPT_IN}: "true" }\nstringData: { tls.crt: "certificate", tls.key: "key" }\n`,
    );
    await certStatus({ conditions: [{ type: 'Ready', status: 'True', reason: 'Ready', message: 'Certificate is up to date and has not expired' }], notAfter: '2027-03-01T00:00:00Z' });
    expect(await untilReason('issued', 'Ready', 'NoReadyPods')).toMatchObject({ status: 'False' });
    expect((await untilReason('issued', 'Certificate', 'Issued'))?.message).toBe(
      'Certificate "issued" from ClusterIssuer "corp-ca" is issued into Secret "issued-cert", valid until 2027-03-01T00:00:00Z; cert-manager renews it, and the pods serve each renewal without a roll',
    );
    type Deployment = { spec: { template: { metadata: { annotations: Record<string, string> }; spec: { volumes: { name: string; secret?: { secretName: string } }[] } } } };
    const template = async () => (await json<Deployment>(['get', 'deployment', 'issued', '-n', NS])).spec.template;
    const before = await template();
    expect(before.spec.volumes.find((v) => v.name === 'tls')?.secret?.secretName).toBe('issued-cert');
    expect((await kubectl(['get', 'service', 'issued', '-n', NS, '-o', 'jsonpath={.spec.ports[0].port}'])).stdout).toBe('443');
    expect(await url('issued')).toBe('https://issued.team.svc');
    // A renewal as cert-manager makes it (the Secret rewritten, then the Certificate's new expiry):
    // once the registry reports the new expiry, the pod template is unchanged (the pods re-read the files).
    await kubectl(
      ['apply', '-f', '-'],
      `apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\nmetadata:\n  name: issued-cert\n  namespace: ${NS}\n  labels: { ${OPT_IN}: "true" }\nstringData: { tls.crt: "renewed certificate", tls.key: "renewed key" }\n`,
    );
    await certStatus({ notAfter: '2027-06-01T00:00:00Z' });
    await until('the renewal reported', async () => ((await condition('issued', 'Certificate'))?.message.includes('valid until 2027-06-01T00:00:00Z') ? true : undefined));
    expect((await template()).metadata.annotations).toEqual(before.metadata.annotations);

    // Both fields dropped: both objects deleted; the Secret stays, and the pods keep serving it.
    await kubectl(['patch', 'packageregistry', 'routed', '-n', NS, '--type=json', '-p', '[{"op":"remove","path":"/spec/gatewayRoute"}]']);
    await kubectl(['patch', 'packageregistry', 'issued', '-n', NS, '--type=json', '-p', '[{"op":"remove","path":"/spec/tls/certManager"}]']);
    await until('the HTTPRoute and the Certificate gone', async () => ((await kubectl(['get', 'httproute,certificate', '-n', NS, '-o', 'name'])).stdout.trim() === '' ? true : undefined));
    expect((await kubectl(['get', 'secret', 'issued-cert', '-n', NS, '-o', 'name'])).stdout.trim()).toBe('secret/issued-cert');
    // Reconciled at the new generation: still served, without a Certificate condition.
    expect(await untilReason('issued', 'Ready', 'NoReadyPods')).toBeDefined();
    expect((await json<Obj>(['get', 'packageregistry', 'issued', '-n', NS])).status?.conditions?.map((c) => c.type)).toEqual(['Ready', 'Reconciling', 'Stalled']);
    expect(await until('the in-cluster address again', async () => ((await url('routed')) === 'http://routed.team.svc' ? true : undefined))).toBe(true);
    await kubectl(['delete', 'packageregistry', 'routed', 'issued', '-n', NS]);
  });

  it('says why each index is or is not served, in kubectl get', async () => {
    expect(await until('hosted status', () => readyOf('hosted'))).toMatchObject({ status: 'False', reason: 'NoReadyPods' });
    expect(await until('clash status', () => readyOf('clash'))).toMatchObject({ status: 'False', reason: 'RouteConflict', message: 'route "team/hosted" is already served by the older PackageIndex "hosted"' });
    expect(await until('nosecret status', () => readyOf('nosecret'))).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(await until('elsewhere status', () => readyOf('elsewhere'))).toMatchObject({ status: 'False', reason: 'RegistryNotFound' });
    const table = (await kubectl(['get', 'packageindex', '-n', NS])).stdout;
    expect(table.split('\n')[0]).toMatch(/^NAME\s+ROUTE\s+ECOSYSTEM\s+ROLE\s+REGISTRY\s+READY\s+UPSTREAM\s+SIZE\s+AGE$/);
    // The registry's total beside its readiness; empty, as an index's SIZE, until pods have counted.
    expect((await kubectl(['get', 'packageregistry', '-n', NS])).stdout.split('\n')[0]).toMatch(/^NAME\s+REPLICAS\s+READY-PODS\s+INDEXES\s+READY\s+SIZE\s+VERSION\s+AGE$/);
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

  it('renders spec.nodeMirror as [[mirror]] and says in the NodeMirror condition which entry it left out and why', async () => {
    await kubectl(
      ['apply', '-f', '-'],
      [
        registryYaml('mirrors', '  nodeMirror:\n    registries: [{ registry: docker.io, index: hub }, { registry: ghcr.io, index: ghcr }]\n'),
        indexYaml('hub', '  registry: mirrors\n  route: hub\n  ecosystem: oci\n  role: cached\n  upstream: https://registry-1.docker.io\n'),
      ].join('---\n'),
    );
    const condition = await until('the NodeMirror condition', async () => {
      const o = await json<Obj>(['get', 'packageregistry', 'mirrors', '-n', NS]);
      return o.status?.observedGeneration === o.metadata.generation ? o.status?.conditions?.find((c) => c.type === 'NodeMirror') : undefined;
    });
    expect(condition).toMatchObject({ status: 'False', reason: 'EntriesLeftOut', message: 'not mirrored: ghcr.io (index ghcr): PackageIndex "ghcr" is not an index of this registry; mirrors docker.io by hub' });
    const config = await until('the mirrors ConfigMap', () => json<Obj>(['get', 'configmap', 'mirrors-config', '-n', NS]).catch(() => undefined));
    expect(Object.values(config.data ?? {}).join('\n')).toMatch(/\[\[mirror\]\]\nregistry = "docker.io"\nindex = "hub"/);
  });

  it('rolls the pods (a new checksum) when a referenced Secret rotates, and applies an index edit', async () => {
    const checksum = async () => (await json<Obj>(['get', 'deployment', 'default', '-n', NS])).spec?.template?.metadata?.annotations?.['velodex.dev/config-checksum'];
    const before = await until('a checksum', checksum);
    await kubectl(['apply', '-f', '-'], secretYaml('tokens', { hosted: 'token-two' }));
    const after = await until('a new checksum', async () => {
      const c = await checksum();
      return c !== before ? c : undefined;
    });
    expect(after).toMatch(/^[0-9a-f]{64}$/);
    await kubectl(['patch', 'pidx', 'pypi', '-n', NS, '--type=merge', '-p', '{"spec":{"upstreamConcurrency":7}}']);
    await until('the edit in the ConfigMap', async () => ((await json<Obj>(['get', 'configmap', 'default-config', '-n', NS])).data?.['velodex.toml']?.includes('upstream_concurrency = 7') ? true : undefined));
    // Fixing the secret reference makes the index served.
    await kubectl(['apply', '-f', '-'], secretYaml('absent', { token: 't3' }));
    expect(await until('nosecret served', async () => ((await readyOf('nosecret'))?.reason === 'NoReadyPods' ? true : undefined))).toBe(true);
  });

  it('uses only Secrets labelled velodex.dev/allow-reference=true: another is refused by name, never read, never mounted', async () => {
    const BORROWED = 'borrowed-value-never-read-7c1e';
    const BYSTANDER = 'bystander-value-never-read-40fa';
    await kubectl(['apply', '-f', '-'], [secretYaml('kube-admin', { token: BORROWED }, false), secretYaml('bystander', { other: BYSTANDER }, false), secretYaml('hook-urls', { chat: 'https://hooks.chat.example/services/T0/B0/chat-key-40fa' })].join('---\n'));
    await kubectl(
      ['apply', '-f', '-'],
      [
        indexYaml('borrow', '  route: team/borrow\n  ecosystem: python\n  role: cached\n  upstream: https://attacker.example/simple/\n  upstreamCredentialsSecretRef: { name: kube-admin, usernameKey: token, passwordKey: token }\n'),
        indexYaml('chat', '  route: team/chat\n  ecosystem: python\n  role: hosted\n  webhooks: [{ urlSecretRef: { name: hook-urls, key: chat }, events: [upload] }]\n'),
      ].join('---\n'),
    );
    const refused = await until('borrow refused', async () => ((await readyOf('borrow'))?.reason === 'SecretNotOptedIn' ? readyOf('borrow') : undefined));
    expect(refused).toMatchObject({ status: 'False', reason: 'SecretNotOptedIn' });
    expect(refused?.message).toContain('spec.upstreamCredentialsSecretRef: Secret "kube-admin" is not labelled velodex.dev/allow-reference=true');
    expect(refused?.message).toContain('kubectl label secret kube-admin -n team velodex.dev/allow-reference=true');
    // The Secret whose whole URL is the receiver's key: taken as a file, never in the ConfigMap.
    const cm = await until('the chat index in the ConfigMap', async () => {
      const c = await json<Obj>(['get', 'configmap', 'default-config', '-n', NS]);
      return c.data?.['velodex.toml']?.includes('name = "chat"') ? c : undefined;
    });
    const toml = cm.data?.['velodex.toml'] ?? '';
    expect(toml).toContain('url_file = "/var/run/velodex/secrets/hook-urls/chat"');
    expect(toml).not.toContain('chat-key-40fa');
    expect(toml).not.toContain('kube-admin');
    const volumes = async () => JSON.stringify((await json<{ spec: { template: { spec: { volumes: unknown[] } } } }>(['get', 'deployment', 'default', '-n', NS])).spec.template.spec.volumes);
    expect(await volumes()).not.toContain('kube-admin');

    // What the operator asked the API server for (the audit log): the suite's admin user, whose
    // kubectl calls are set aside (the API server's own informers are another user).
    // Secrets listed and watched only by the label, the others asked for by name as a table row
    // without the object, and no answer it got ever held an unlabelled Secret's data.
    const operatorCalls = api.audit().filter((e) => e.objectRef?.resource === 'secrets' && e.user?.username === 'velodex-admin' && !(e.userAgent ?? '').startsWith('kubectl'));
    expect(operatorCalls.some((e) => e.verb === 'watch')).toBe(true);
    for (const e of operatorCalls) {
      const selected = decodeURIComponent(e.requestURI).includes('labelSelector=velodex.dev/allow-reference=true');
      const byName = /fieldSelector=metadata\.name(%3D|=)/.test(e.requestURI);
      expect(selected || byName, `${e.verb} ${e.requestURI} (${e.userAgent})`).toBe(true);
      expect(['list', 'watch'], e.requestURI).toContain(e.verb);
      const answer = JSON.stringify(e.responseObject ?? {});
      if (byName) {
        const table = e.responseObject as { kind?: string; rows?: { object?: unknown }[] | null };
        expect(table.kind).toBe('Table');
        for (const row of table.rows ?? []) expect(row.object ?? null, JSON.stringify(table)).toBeNull();
      }
      for (const value of [BORROWED, BYSTANDER]) {
        expect(answer).not.toContain(value);
        expect(answer).not.toContain(Buffer.from(value).toString('base64'));
      }
    }
    expect(operatorCalls.some((e) => /fieldSelector=metadata\.name(%3D|=)kube-admin/.test(e.requestURI))).toBe(true);

    // Labelled, the Secret is used: the index is served and the Secret mounted.
    await kubectl(['label', 'secret', 'kube-admin', '-n', NS, `${OPT_IN}=true`]);
    expect(await until('borrow served', async () => ((await readyOf('borrow'))?.reason === 'NoReadyPods' ? true : undefined))).toBe(true);
    expect(await until('kube-admin mounted', async () => ((await volumes()).includes('"secretName":"kube-admin"') ? true : undefined))).toBe(true);
    await kubectl(['delete', 'pidx', 'borrow', 'chat', '-n', NS]);
  });

  it('runs only the images the platform allows; a registry naming another is refused and its Deployment keeps its image', async () => {
    await kubectl(
      ['apply', '-f', '-'],
      [
        registryYaml('custom', '  image: ghcr.io/acme/velodex:2.0.1\n'),
        registryYaml('rogue', '  image: evil.example/velodex:1\n'),
        indexYaml('on-custom', '  registry: custom\n  route: team/custom\n  ecosystem: python\n  role: hosted\n'),
        indexYaml('on-rogue', '  registry: rogue\n  route: team/rogue\n  ecosystem: python\n  role: hosted\n'),
      ].join('---\n'),
    );
    const image = async (name: string) => (await json<{ spec: { template: { spec: { containers: { image: string }[] } } } }>(['get', 'deployment', name, '-n', NS])).spec.template.spec.containers[0]?.image;
    expect(await until('the custom Deployment', () => image('custom').catch(() => undefined))).toBe('ghcr.io/acme/velodex:2.0.1');
    const rogue = await until('rogue refused', async () => {
      const o = await json<Obj>(['get', 'packageregistry', 'rogue', '-n', NS]);
      return o.status?.observedGeneration === o.metadata.generation && ready(o)?.reason === 'ImageNotAllowed' ? ready(o) : undefined;
    });
    expect(rogue?.message).toContain('spec.image "evil.example/velodex:1" is not an image this platform lets a registry run');
    expect(rogue?.message).toContain('"ghcr.io/acme/velodex:*"');
    expect(await until('on-rogue status', () => readyOf('on-rogue'))).toMatchObject({ status: 'False', reason: 'ImageNotAllowed' });
    expect((await kubectl(['get', 'deployment', 'rogue', '-n', NS], undefined, true)).stderr).toContain('NotFound');
    // An allowed registry switched to an image outside the list: refused, and its pods keep the old image.
    await kubectl(['patch', 'packageregistry', 'custom', '-n', NS, '--type=merge', '-p', '{"spec":{"image":"ghcr.io/acme/velodex-evil:2"}}']);
    expect(await until('on-custom refused', async () => ((await readyOf('on-custom'))?.reason === 'ImageNotAllowed' ? true : undefined))).toBe(true);
    expect(await image('custom')).toBe('ghcr.io/acme/velodex:2.0.1');
    await kubectl(['delete', 'pidx', 'on-custom', 'on-rogue', '-n', NS]);
    await kubectl(['delete', 'packageregistry', 'custom', 'rogue', '-n', NS]);
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
