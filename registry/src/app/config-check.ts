/**
 * The registry's own config check, for programs that write a config for it (the Kubernetes
 * operator): the same parsing and validation `velodex serve` runs, so a config the registry would
 * refuse is refused before it reaches a pod, with the registry's own message.
 */
import { ConfigError } from '../config/errors.js';
import { parseConfigText } from '../config/load.js';
import type { Config } from '../config/types.js';
import { ecosystems } from './ecosystems.js';

export { ConfigError };
export type { Config };

/**
 * What the environment of every pod holds that a config may rely on: the API server's Service,
 * which `[kubernetes]` defaults to. The values stand for the pod's; the check only needs them set.
 */
export const POD_ENV: NodeJS.ProcessEnv = { KUBERNETES_SERVICE_HOST: 'kubernetes.default.svc', KUBERNETES_SERVICE_PORT: '443' };

/**
 * Validates TOML text as `velodex serve --config` would in a pod (`POD_ENV`, nothing else of the
 * caller's environment). `readSecretFile` answers for `_file` secrets (the operator: from the
 * Secret a path will be mounted from). Throws `ConfigError`.
 */
export function checkConfigText(text: string, source: string, readSecretFile: (path: string) => string): Config {
  return parseConfigText(text, source, { ecosystems, env: { ...POD_ENV }, readSecretFile });
}
