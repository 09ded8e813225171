/**
 * A real Kubernetes API server for the operator suites that need no nodes: etcd and
 * kube-apiserver (built from the Go module proxy by hack/k8s-tools.sh), started as child processes
 * on free 127.0.0.1 ports with fresh folders and stopped by their PIDs. Authentication is a static
 * token of a `system:masters` user (written to a kubeconfig for kubectl, helm and the operator);
 * authorization is RBAC, so a suite can check the chart's least-privilege roles by impersonation.
 * The serving certificate is the API server's own self-signed one; the kubeconfig skips its
 * verification (loopback only).
 *
 * `auditSecrets` turns on the API server's audit log for Secrets, request and response bodies
 * included: a suite reads it (`audit()`) to see which Secrets a client asked for and was given.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { tool } from './paths.js';
import { freePort } from './pypiserver.js';
import { stopChild } from './stop-child.js';
import { tempDir } from './velodex.js';

export interface KubeApi {
  /** `https://127.0.0.1:<port>` */
  server: string;
  /** A kubeconfig file with the admin token (context `velodex-test`). */
  kubeconfig: string;
  token: string;
  /** The API server's self-signed serving certificate with its CA (PEM): what a client verifies it with. */
  caFile: string;
  /** The private key that signs ServiceAccount tokens (PEM, PKCS#8): for a suite that signs one the API server would not issue (an expired one). */
  serviceAccountKeyFile: string;
  /** The environment kubectl and helm need to use it (KUBECONFIG, a private HOME). */
  env: Record<string, string>;
  logs(): string;
  /** The audit events so far (only with `auditSecrets`; empty otherwise). */
  audit(): AuditEvent[];
  stop(): Promise<void>;
}

/** One line of the audit log (audit.k8s.io/v1 Event), the fields the suites read. */
export interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  userAgent?: string;
  user?: { username?: string };
  objectRef?: { resource?: string; namespace?: string; name?: string };
  responseStatus?: { code?: number };
  responseObject?: unknown;
}

export interface KubeApiOptions {
  auditSecrets?: boolean;
}

/** Every request on Secrets, with its response body; nothing else. */
const SECRETS_AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: RequestResponse
    resources: [{ group: "", resources: [secrets] }]
  - level: None
`;

const READY_TIMEOUT_MS = 90_000;

export async function startKubeApi(opts: KubeApiOptions = {}): Promise<KubeApi> {
  const root = tempDir('velodex-kube-');
  const auditLog = join(root, 'audit.log');
  const children: ChildProcess[] = [];
  let log = '';
  const keep = (name: string) => (b: Buffer) => {
    log = (log + b.toString().replace(/^/gm, `[${name}] `)).slice(-40_000);
  };
  const start = (name: string, exe: string, args: string[]) => {
    const child = spawn(exe, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root }, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', keep(name));
    child.stderr.on('data', keep(name));
    children.push(child);
    return child;
  };
  const stop = async () => {
    for (const child of [...children].reverse()) await stopChild(child, 10_000);
    rmSync(root, { recursive: true, force: true });
  };

  try {
    const [etcdClient, etcdPeer, apiPort] = [await freePort(), await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    const peerUrl = `http://127.0.0.1:${etcdPeer}`;
    start('etcd', tool('etcd'), [
      '--data-dir', join(root, 'etcd'),
      '--listen-client-urls', etcdUrl,
      '--advertise-client-urls', etcdUrl,
      '--listen-peer-urls', peerUrl,
      '--initial-advertise-peer-urls', peerUrl,
      '--initial-cluster', `default=${peerUrl}`,
      '--log-level', 'warn',
    ]);

    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(join(root, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
    writeFileSync(join(root, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    const token = randomBytes(24).toString('hex');
    writeFileSync(join(root, 'tokens.csv'), `${token},velodex-admin,velodex-admin,system:masters\n`, { mode: 0o600 });

    const server = `https://127.0.0.1:${apiPort}`;
    const audit: string[] = [];
    if (opts.auditSecrets) {
      writeFileSync(join(root, 'audit-policy.yaml'), SECRETS_AUDIT_POLICY);
      // The blocking mode writes each event before the request completes: what a suite reads is complete.
      audit.push('--audit-policy-file', join(root, 'audit-policy.yaml'), '--audit-log-path', auditLog, '--audit-log-mode', 'blocking', '--audit-log-format', 'json');
    }
    const apiserver = start('kube-apiserver', tool('kube-apiserver'), [
      ...audit,
      '--etcd-servers', etcdUrl,
      '--bind-address', '127.0.0.1',
      '--advertise-address', '127.0.0.1',
      '--secure-port', String(apiPort),
      '--cert-dir', join(root, 'certs'),
      '--token-auth-file', join(root, 'tokens.csv'),
      '--authorization-mode', 'RBAC',
      '--service-account-issuer', 'https://kubernetes.default.svc',
      '--service-account-key-file', join(root, 'sa.pub'),
      '--service-account-signing-key-file', join(root, 'sa.key'),
      '--service-cluster-ip-range', '10.96.0.0/16',
      '--enable-priority-and-fairness=false',
      '--v', '1',
    ]);

    const kubeconfig = join(root, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '- name: velodex-test',
        '  cluster:',
        `    server: ${server}`,
        '    insecure-skip-tls-verify: true',
        'users:',
        '- name: velodex-admin',
        '  user:',
        `    token: ${token}`,
        'contexts:',
        '- name: velodex-test',
        '  context: { cluster: velodex-test, user: velodex-admin, namespace: default }',
        'current-context: velodex-test',
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    await untilReady(server, token, apiserver, () => log);
    return {
      server,
      kubeconfig,
      token,
      caFile: join(root, 'certs', 'apiserver.crt'),
      serviceAccountKeyFile: join(root, 'sa.key'),
      env: { KUBECONFIG: kubeconfig, HOME: root },
      logs: () => log,
      audit: () => readAudit(auditLog),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function readAudit(path: string): AuditEvent[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as AuditEvent);
}

/** `/readyz` answers 200 once the API server serves (its post-start hooks done). */
async function untilReady(server: string, token: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`kube-apiserver exited before it was ready:\n${log()}`);
    if ((await readyz(server, token)) === 200) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`kube-apiserver did not become ready within ${READY_TIMEOUT_MS / 1000} s:\n${log()}`);
}

/** The status of GET /readyz, or 0 when nothing answers. The certificate is self-signed (loopback). */
function readyz(server: string, token: string): Promise<number> {
  return new Promise((resolve) => {
    const req = https.get(`${server}/readyz`, { headers: { authorization: `Bearer ${token}` }, rejectUnauthorized: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
  });
}
