/** Where a write to an index lands: itself when hosted, its upload target when virtual. */
import type { HostedIndex, IndexConfig } from '../config/types.js';

export function writeTarget(index: IndexConfig, byName: ReadonlyMap<string, IndexConfig>): HostedIndex | null {
  if (index.role === 'hosted') return index;
  if (index.role !== 'virtual' || !index.uploadTarget) return null;
  // The loader checked that the upload target is a hosted member.
  const target = byName.get(index.uploadTarget);
  return target?.role === 'hosted' ? target : null;
}

/** The member indexes of `index` in order (an index that is not virtual is its own only member). */
export function membersOf(index: IndexConfig, byName: ReadonlyMap<string, IndexConfig>): IndexConfig[] {
  if (index.role !== 'virtual') return [index];
  return index.members.map((m) => byName.get(m)).filter((m): m is IndexConfig => m !== undefined);
}
