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
 * Validates TOML text as `velodex serve --config` would. `readSecretFile` answers for `_file`
 * secrets (the operator: from the Secret a path will be mounted from). Throws `ConfigError`.
 */
export function checkConfigText(text: string, source: string, readSecretFile: (path: string) => string): Config {
  return parseConfigText(text, source, { ecosystems, env: {}, readSecretFile });
}
