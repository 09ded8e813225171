/**
 * How many worker processes serve: `workers` in the file, `VELODEX_WORKERS`, or `--workers`, each
 * a count or `auto`. Auto is one per core on a machine of its own, and one in a Kubernetes pod
 * (seen by the `KUBERNETES_SERVICE_HOST` every pod gets), where replicas scale instead and the
 * pod's CPU limit, not the node's cores, says what one pod may use.
 */
import { availableParallelism } from 'node:os';
import { ConfigError } from './errors.js';

export interface WorkersConfig {
  count: number;
  /** Why this count, for the banner and check-config: `2 (auto: one per core)`. */
  reason: string;
}

/** More would only add memory: each worker is a whole server with its own caches. */
export const MAX_WORKERS = 64;

export type WorkersSetting = number | 'auto';

export function resolveWorkers(setting: WorkersSetting | undefined, env: NodeJS.ProcessEnv, cores = availableParallelism()): WorkersConfig {
  if (setting !== undefined && setting !== 'auto') return { count: setting, reason: `${setting} (set)` };
  if (env.KUBERNETES_SERVICE_HOST) return { count: 1, reason: '1 (auto: in a Kubernetes pod, replicas scale instead)' };
  const count = Math.max(1, Math.min(cores, MAX_WORKERS));
  return { count, reason: `${count} (auto: one per core)` };
}

/** A `--workers` or `VELODEX_WORKERS` value; `where` names it in the error. */
export function parseWorkersSetting(value: string, where: string): WorkersSetting {
  if (value === 'auto') return 'auto';
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isInteger(n) || n < 1 || n > MAX_WORKERS) {
    throw new ConfigError(where, `"${value}" is not a number of workers`, `use auto or an integer from 1 to ${MAX_WORKERS}`);
  }
  return n;
}
