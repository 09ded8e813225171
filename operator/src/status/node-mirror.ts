/** The `NodeMirror` condition of a PackageRegistry with `spec.nodeMirror` (plan/plan.ts `MirrorPlan`). */
import type { MirrorPlan } from '../plan/plan.js';
import type { ConditionInput } from './conditions.js';

/**
 * `NodeMirror`: True when every entry of `spec.nodeMirror` is served, with the map; False naming
 * each entry left out and why (the others are served all the same).
 */
export function nodeMirrorCondition(mirror: MirrorPlan): ConditionInput {
  const served = mirror.served.map((m) => `${m.registry} by ${m.index}`).join(', ');
  if (mirror.left.length === 0) return { type: 'NodeMirror', status: 'True', reason: 'Serving', message: `mirrors ${served}` };
  const left = mirror.left.map(({ entry, message }) => `${entry.registry} (index ${entry.index}): ${message}`).join('; ');
  return { type: 'NodeMirror', status: 'False', reason: 'EntriesLeftOut', message: `not mirrored: ${left}${served ? `; mirrors ${served}` : ''}` };
}
