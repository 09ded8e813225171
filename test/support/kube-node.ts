/**
 * A real single-node Kubernetes cluster for the end-to-end suite (stock kind cannot start here:
 * its node image comes from Docker Hub): etcd, kube-apiserver, kube-controller-manager,
 * kube-scheduler, kubelet and kube-proxy v1.34.2 built from the Go module proxy
 * (hack/k8s-tools.sh), Debian's containerd with the CRI plugin and runc, the bridge CNI plugin,
 * CoreDNS, and images imported from OCI archives (hack/cluster/images.ts, make image). Real pods
 * run in their own network namespaces on a bridge this harness creates (`velodex0`,
 * 10.240.0.1/24); Services get ClusterIPs from 10.241.0.0/24 through kube-proxy's iptables rules.
 * Every address a client uses is one the harness created: the bridge's, a pod's or a ClusterIP.
 *
 * Settings this VM needs: `restrict_oom_score_adj` in containerd's CRI config (no
 * CAP_SYS_RESOURCE), cgroupfs (cgroup v1 host), `--kubelet-preferred-address-types=InternalIP`.
 *
 * One cluster per machine at a time (fixed bridge and subnets). `stop()` undoes what the node did
 * to the host: processes and leftover container shims, mounts below the run folder, kube-proxy's
 * iptables chains, the bridge and veths, the pod log folders it created, the kubepods cgroups, and
 * the three sysctls kubelet sets (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { tool, TOOLS } from './paths.js';
import { run, type RunResult } from './run.js';
import { stopChild } from './stop-child.js';
import { tempDir } from './velodex.js';

export const BRIDGE = 'velodex0';
export const NODE_IP = '10.240.0.1';
const POD_CIDR = '10.240.0.0/24';
const SERVICE_CIDR = '10.241.0.0/24';
const DNS_IP = '10.241.0.10';
const NODE_NAME = 'velodex-node';
const SYSCTLS = ['vm.overcommit_memory', 'kernel.panic', 'kernel.panic_on_oops'];

export interface KubeNode {
  kubeconfig: string;
  /** KUBECONFIG and a private HOME, for kubectl and helm. */
  env: Record<string, string>;
  kubectl(args: string[], opts?: { input?: string; allowFailure?: boolean; timeoutMs?: number }): Promise<RunResult>;
  /**
   * The node containerd's registry hosts folder (`config_path` of its CRI plugin): a
   * `<host>/hosts.toml` written here applies to the next pull of an image of that host.
   */
  certsDir: string;
  /** `ctr -n k8s.io images import` of an OCI archive into the node's containerd. */
  importImage(archive: string): Promise<void>;
  /**
   * Kills a container's process on the node (`ctr task kill -s SIGKILL`): the kubelet restarts it
   * in the same pod, whose emptyDirs stay, as after a crash. `id` as a pod's status names it,
   * with or without the `containerd://` prefix.
   */
  killContainer(id: string): Promise<void>;
  /** The last lines every component printed, for a failure message. */
  logs(): string;
  stop(): Promise<void>;
}

const sh = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const quiet = (cmd: string, args: string[]) => {
  try {
    return sh(cmd, args);
  } catch {
    return '';
  }
};

function pki(dir: string): void {
  const ossl = (args: string[]) => sh('openssl', args);
  ossl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'ca.key'), '-out', join(dir, 'ca.crt'), '-days', '2', '-subj', '/CN=velodex-test-ca']);
  const sign = (name: string, subj: string, ext: string) => {
    writeFileSync(join(dir, `${name}.cnf`), `[req]\ndistinguished_name=dn\n[dn]\n[ext]\n${ext}\n`);
    ossl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, `${name}.key`), '-out', join(dir, `${name}.csr`), '-subj', subj]);
    ossl(['x509', '-req', '-in', join(dir, `${name}.csr`), '-CA', join(dir, 'ca.crt'), '-CAkey', join(dir, 'ca.key'), '-CAcreateserial', '-out', join(dir, `${name}.crt`), '-days', '2', '-extfile', join(dir, `${name}.cnf`), '-extensions', 'ext']);
  };
  sign('apiserver', '/CN=kube-apiserver', `subjectAltName=IP:${NODE_IP},IP:10.241.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local`);
  // The API server's client certificate for kubelet (logs, exec, port-forward).
  sign('kubelet-client', '/CN=kube-apiserver-kubelet-client/O=system:masters', 'extendedKeyUsage=clientAuth');
  ossl(['genrsa', '-out', join(dir, 'sa.key'), '2048']);
  ossl(['rsa', '-in', join(dir, 'sa.key'), '-pubout', '-out', join(dir, 'sa.pub')]);
}

function kubeconfig(path: string, ca: string, token: string): void {
  writeFileSync(
    path,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://${NODE_IP}:6443", certificate-authority: "${ca}"}}]\n` +
      `users: [{name: u, user: {token: "${token}"}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n`,
    { mode: 0o600 },
  );
}

export async function startKubeNode(): Promise<KubeNode> {
  if (existsSync(`/sys/class/net/${BRIDGE}`)) throw new Error(`${BRIDGE} exists: another test cluster runs on this machine, or one was not torn down (ip link del ${BRIDGE})`);
  const root = tempDir('velodex-node-');
  const run_ = join(root, 'run');
  for (const d of ['pki', 'cni', 'logs', 'certs.d']) mkdirSync(join(run_, d), { recursive: true });
  const p = (...parts: string[]) => join(run_, ...parts);
  const children: Array<{ name: string; child: ChildProcess }> = [];
  let log = '';
  const sysctls = Object.fromEntries(SYSCTLS.map((k) => [k, quiet('sysctl', ['-n', k]).trim()]));
  const podLogsBefore = new Set(existsSync('/var/log/pods') ? readdirSync('/var/log/pods') : []);

  const start = (name: string, exe: string, args: string[]) => {
    const child = spawn(exe, args, { env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', HOME: root }, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (b: Buffer) => (log = (log + b.toString().replace(/^/gm, `[${name}] `)).slice(-60_000));
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    children.push({ name, child });
  };
  const bin = (name: string) => tool(name);
  const admin = p('admin.kubeconfig');
  const env = { KUBECONFIG: admin, HOME: root };
  const kubectl: KubeNode['kubectl'] = (args, o = {}) => run(bin('kubectl'), args, { env, input: o.input, allowFailure: o.allowFailure, timeoutMs: o.timeoutMs ?? 120_000 });

  const stop = async () => {
    // Pods stopped by their own kubelet first (the system namespaces cannot be deleted; the
    // cgroup sweep below takes what is left).
    await kubectl(['delete', 'namespace', '--all', '--wait=true', '--timeout=60s'], { allowFailure: true, timeoutMs: 90_000 }).catch(() => undefined);
    for (const { child } of [...children].reverse()) await stopChild(child, 10_000);
    quiet('pkill', ['-9', '-f', `containerd-shim-runc-v2 .*${run_}`]);
    // Containers outlive their shims: every process left in the pods' cgroups goes too.
    quiet('sh', ['-c', 'for f in $(find /sys/fs/cgroup/*/kubepods* -name cgroup.procs 2>/dev/null); do for pid in $(cat "$f"); do kill -9 "$pid" 2>/dev/null; done; done; sleep 1']);
    for (const mount of readFileSync('/proc/mounts', 'utf8').split('\n').map((l) => l.split(' ')[1] ?? '').filter((m) => m.startsWith(root)).sort().reverse()) quiet('umount', ['-l', mount]);
    for (const table of ['filter', 'nat', 'mangle']) {
      const rules = quiet('iptables', ['-t', table, '-S']).split('\n');
      for (const rule of rules.filter((r) => r.startsWith('-A ') && r.includes('-j KUBE-') && !r.startsWith('-A KUBE-'))) quiet('sh', ['-c', `iptables -t ${table} ${rule.replace(/^-A/, '-D')}`]);
      const chains = rules.filter((r) => r.startsWith('-N KUBE-')).map((r) => r.slice(3));
      for (const c of chains) quiet('iptables', ['-t', table, '-F', c]);
      for (const c of chains) quiet('iptables', ['-t', table, '-X', c]);
    }
    quiet('ip', ['link', 'del', BRIDGE]);
    for (const [k, v] of Object.entries(sysctls)) if (v !== '') quiet('sysctl', ['-qw', `${k}=${v}`]);
    if (existsSync('/var/log/pods')) for (const d of readdirSync('/var/log/pods')) if (!podLogsBefore.has(d)) rmSync(join('/var/log/pods', d), { recursive: true, force: true });
    for (const controller of existsSync('/sys/fs/cgroup') ? readdirSync('/sys/fs/cgroup') : []) quiet('sh', ['-c', `find /sys/fs/cgroup/${controller}/kubepods* -depth -type d -exec rmdir {} \\; 2>/dev/null`]);
    rmSync(root, { recursive: true, force: true });
  };

  try {
    sh('ip', ['link', 'add', BRIDGE, 'type', 'bridge']);
    sh('ip', ['addr', 'add', `${NODE_IP}/24`, 'dev', BRIDGE]);
    sh('ip', ['link', 'set', BRIDGE, 'up']);
    pki(p('pki'));
    const adminToken = randomBytes(16).toString('hex');
    const kubeletToken = randomBytes(16).toString('hex');
    writeFileSync(p('pki', 'tokens.csv'), `${adminToken},admin,admin,system:masters\n${kubeletToken},system:node:${NODE_NAME},kubelet,system:nodes\n`, { mode: 0o600 });
    kubeconfig(admin, p('pki', 'ca.crt'), adminToken);
    kubeconfig(p('kubelet.kubeconfig'), p('pki', 'ca.crt'), kubeletToken);

    start('etcd', bin('etcd'), ['--data-dir', p('etcd'), '--listen-client-urls', 'http://127.0.0.1:23790', '--advertise-client-urls', 'http://127.0.0.1:23790', '--listen-peer-urls', 'http://127.0.0.1:23800', '--initial-advertise-peer-urls', 'http://127.0.0.1:23800', '--initial-cluster', 'default=http://127.0.0.1:23800', '--log-level', 'warn']);
    start('apiserver', bin('kube-apiserver'), [
      '--etcd-servers', 'http://127.0.0.1:23790', '--bind-address', NODE_IP, '--advertise-address', NODE_IP, '--secure-port', '6443',
      '--tls-cert-file', p('pki', 'apiserver.crt'), '--tls-private-key-file', p('pki', 'apiserver.key'), '--client-ca-file', p('pki', 'ca.crt'),
      '--kubelet-client-certificate', p('pki', 'kubelet-client.crt'), '--kubelet-client-key', p('pki', 'kubelet-client.key'),
      '--token-auth-file', p('pki', 'tokens.csv'), '--authorization-mode', 'Node,RBAC', '--service-cluster-ip-range', SERVICE_CIDR,
      '--service-account-issuer', 'https://kubernetes.default.svc', '--service-account-key-file', p('pki', 'sa.pub'), '--service-account-signing-key-file', p('pki', 'sa.key'),
      '--kubelet-preferred-address-types', 'InternalIP,Hostname', '--allow-privileged=true',
    ]);
    await until('the API server', async () => (await kubectl(['get', '--raw', '/readyz'], { allowFailure: true, timeoutMs: 5_000 })).code === 0, () => log);
    start('controller-manager', bin('kube-controller-manager'), ['--kubeconfig', admin, '--service-account-private-key-file', p('pki', 'sa.key'), '--root-ca-file', p('pki', 'ca.crt'), '--leader-elect=false', '--controllers', '*,-nodeipam,-cloud-node-lifecycle']);
    start('scheduler', bin('kube-scheduler'), ['--kubeconfig', admin, '--leader-elect=false']);

    writeFileSync(
      p('containerd.toml'),
      [
        'version = 2',
        `root = "${p('containerd', 'root')}"`,
        `state = "${p('containerd', 'state')}"`,
        '[grpc]',
        `  address = "${p('containerd.sock')}"`,
        '[plugins."io.containerd.internal.v1.opt"]',
        `  path = "${p('containerd', 'opt')}"`,
        '[plugins."io.containerd.grpc.v1.cri"]',
        '  sandbox_image = "registry.k8s.io/pause:3.10"',
        '  restrict_oom_score_adj = true',
        '  [plugins."io.containerd.grpc.v1.cri".registry]',
        `    config_path = "${p('certs.d')}"`,
        '  [plugins."io.containerd.grpc.v1.cri".cni]',
        '    bin_dir = "/usr/lib/cni"',
        `    conf_dir = "${p('cni')}"`,
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
        '    runtime_type = "io.containerd.runc.v2"',
        '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
        '      SystemdCgroup = false',
        '',
      ].join('\n'),
    );
    writeFileSync(
      p('cni', '10-velodex.conflist'),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'velodex',
        plugins: [
          { type: 'bridge', bridge: BRIDGE, isGateway: true, ipMasq: false, hairpinMode: true, ipam: { type: 'host-local', dataDir: p('cni-ipam'), ranges: [[{ subnet: POD_CIDR, rangeStart: '10.240.0.10', gateway: NODE_IP }]], routes: [{ dst: '0.0.0.0/0' }] } },
          { type: 'loopback' },
        ],
      }),
    );
    start('containerd', bin('containerd'), ['--config', p('containerd.toml')]);
    const ctr = (args: string[]) => run(bin('ctr'), ['--address', p('containerd.sock'), '-n', 'k8s.io', ...args], { timeoutMs: 300_000 });
    await until('containerd', async () => (await run(bin('ctr'), ['--address', p('containerd.sock'), 'version'], { allowFailure: true })).code === 0, () => log);
    const images = join(TOOLS, 'images');
    for (const archive of ['pause.tar', 'coredns.tar']) await ctr(['images', 'import', join(images, archive)]);

    writeFileSync(
      p('kubelet.yaml'),
      [
        'apiVersion: kubelet.config.k8s.io/v1beta1',
        'kind: KubeletConfiguration',
        `address: ${NODE_IP}`,
        'cgroupDriver: cgroupfs',
        'failSwapOn: false',
        `containerRuntimeEndpoint: unix://${p('containerd.sock')}`,
        `authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: "${p('pki', 'ca.crt')}"}}`,
        'authorization: {mode: Webhook}',
        `clusterDNS: ["${DNS_IP}"]`,
        'clusterDomain: cluster.local',
        'resolvConf: ""',
        'evictionHard: {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"}',
        'imageGCHighThresholdPercent: 100',
        'imageGCLowThresholdPercent: 99',
        '',
      ].join('\n'),
    );
    start('kubelet', bin('kubelet'), ['--config', p('kubelet.yaml'), '--kubeconfig', p('kubelet.kubeconfig'), '--node-ip', NODE_IP, '--hostname-override', NODE_NAME, '--root-dir', p('kubelet'), '--cert-dir', p('kubelet-pki')]);
    start('kube-proxy', bin('kube-proxy'), ['--kubeconfig', admin, '--hostname-override', NODE_NAME, '--proxy-mode', 'iptables', '--cluster-cidr', POD_CIDR, '--bind-address', NODE_IP, '--metrics-bind-address', `${NODE_IP}:10249`, '--healthz-bind-address', `${NODE_IP}:10256`]);
    await until('the node to be Ready', async () => (await kubectl(['get', 'node', NODE_NAME, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'], { allowFailure: true })).stdout === 'True', () => log);
    await kubectl(['apply', '-f', '-'], { input: coreDnsManifest() });
    await kubectl(['rollout', 'status', 'deployment/coredns', '-n', 'kube-system', '--timeout=120s']);
    return {
      kubeconfig: admin,
      env,
      kubectl,
      certsDir: p('certs.d'),
      importImage: async (archive) => {
        await ctr(['images', 'import', archive]);
      },
      killContainer: async (id) => {
        await ctr(['tasks', 'kill', '--signal', 'SIGKILL', id.replace(/^containerd:\/\//, '')]);
      },
      logs: () => log,
      stop,
    };
  } catch (err) {
    const message = `${err instanceof Error ? err.message : String(err)}\n${log.slice(-8000)}`;
    await stop();
    throw new Error(message);
  }
}

async function until(what: string, check: () => Promise<boolean>, log: () => string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`timed out waiting for ${what}:\n${log().slice(-6000)}`);
}

/** CoreDNS serving cluster.local from the API (no upstream: nothing outside the node resolves). */
function coreDnsManifest(): string {
  return `apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: coredns}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: coredns}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:1053 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa
        cache 5
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      containers:
      - name: coredns
        image: docker.io/velodex/coredns:e2e
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports: [{containerPort: 1053, protocol: UDP, name: dns}, {containerPort: 1053, protocol: TCP, name: dns-tcp}]
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        volumeMounts: [{name: config, mountPath: /etc/coredns}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system}
spec:
  clusterIP: ${DNS_IP}
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
`;
}
