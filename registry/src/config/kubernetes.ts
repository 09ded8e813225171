/**
 * Kubernetes ServiceAccount identity in the config: `[[index.service_account]]` rules per index
 * and the top-level `[kubernetes]` table that says where their tokens are verified
 * (access/service-accounts/).
 *
 * `[kubernetes]` is resolved only when some index has rules (or the table is given). Its defaults
 * are what every pod has: the API server at `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`,
 * the CA and the pod's own token where the kubelet mounts them. Outside a pod with nothing set
 * the config is refused, naming the keys to set. The two files are not read here: the token
 * rotates, so the verifier reads it each time it asks, and says so at start-up if it cannot.
 */
import { ConfigError } from './errors.js';
import { DEFAULT_AUDIENCE } from './publishers.js';
import { refuseWriteScopes } from './tokens.js';
import type { KubernetesFileConfig, ServiceAccountFileConfig } from './schema.js';
import type { KubernetesConfig, Role, ServiceAccountRule } from './types.js';

/** Where the kubelet mounts a pod's ServiceAccount credentials (automountServiceAccountToken). */
export const POD_CREDENTIALS_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export function resolveServiceAccounts(given: readonly ServiceAccountFileConfig[] | undefined, where: string, role: Role): ServiceAccountRule[] {
  const seen = new Set<string>();
  return (given ?? []).map((r, i) => {
    const at = `${where}.service_account[${i}]`;
    const key = `${r.namespace}/${r.name}`;
    if (seen.has(key)) {
      throw new ConfigError(at, `ServiceAccount "${r.name}" of namespace "${r.namespace}" has another rule on this index`, 'give each ServiceAccount (or "*" of a namespace) one rule per index, with every scope it needs');
    }
    seen.add(key);
    const scopes = [...new Set(r.scopes)];
    refuseWriteScopes(scopes, `${at}.scopes`, role, 'rule');
    const rule: ServiceAccountRule = { namespace: r.namespace, name: r.name, scopes };
    if (r.projects !== undefined) rule.projects = r.projects;
    return rule;
  });
}

/** `[kubernetes]` with its defaults; undefined when nothing needs it. `env` is the process's (a pod's). */
export function resolveKubernetes(table: KubernetesFileConfig | undefined, needed: boolean, env: NodeJS.ProcessEnv): KubernetesConfig | undefined {
  if (!needed && table === undefined) return undefined;
  const t = table ?? {};
  return {
    audience: t.audience ?? DEFAULT_AUDIENCE,
    apiServer: t.api_server !== undefined ? apiServerOrigin(t.api_server) : inPodApiServer(env),
    caFile: t.ca_file ?? `${POD_CREDENTIALS_DIR}/ca.crt`,
    tokenFile: t.token_file ?? `${POD_CREDENTIALS_DIR}/token`,
  };
}

/** The bearer token goes to this origin only: https, and nothing past the host and port. */
function apiServerOrigin(value: string): string {
  const url = new URL(value);
  const hint = 'give the API server as https://host[:port], e.g. https://kubernetes.default.svc';
  if (url.protocol !== 'https:') throw new ConfigError('kubernetes.api_server', `"${value}" is not an https URL (the pod's token is sent to it)`, hint);
  if (url.username || url.password || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
    throw new ConfigError('kubernetes.api_server', `"${value}" has more than a scheme, host and port`, hint);
  }
  return url.origin;
}

function inPodApiServer(env: NodeJS.ProcessEnv): string {
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host) {
    throw new ConfigError(
      'kubernetes.api_server',
      'is not set, and velodex does not run in a Kubernetes pod (KUBERNETES_SERVICE_HOST is unset), where it would be found; [[index.service_account]] rules need it',
      'set api_server, ca_file and token_file in [kubernetes], or remove the service_account rules',
    );
  }
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  return apiServerOrigin(`https://${host.includes(':') ? `[${host}]` : host}:${port}`);
}
