/**
 * Which policy a Python request is judged by. Reads use the policy of the route's index; writes
 * use the strictest of the route's index and the hosted index that receives the write. Compiled
 * once per index (the config does not change while the process runs).
 */
import type { IndexConfig } from '../../../config/types.js';
import { Policy } from '../../../policy/rules.js';
import { normalizeName } from '../../model/records.js';

const compiled = new WeakMap<IndexConfig, Policy>();

export function readPolicy(index: IndexConfig): Policy {
  let policy = compiled.get(index);
  if (!policy) {
    policy = new Policy([index.policy], normalizeName);
    compiled.set(index, policy);
  }
  return policy;
}

export function writePolicy(index: IndexConfig, target: IndexConfig): Policy {
  return index === target ? readPolicy(index) : new Policy([index.policy, target.policy], normalizeName);
}
