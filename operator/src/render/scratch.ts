/**
 * The pods' scratch space: the size limit of their `emptyDir` (the data dir: staged uploads and
 * pull-through fills, the temporary folder, archive walks), and the part of it the registry's own
 * staged writes may hold (`[storage] scratch_limit`), so that the registry refuses an upload that
 * would not fit (413, or 503 for now) before the kubelet evicts the pod for outgrowing its volume.
 */
import type { PackageRegistry } from '../resources/types.js';

/** The scratch volume's size unless `spec.scratch.sizeLimit` says otherwise (see `scratchLimit`). */
export const DEFAULT_SCRATCH_LIMIT_BYTES = 10 * 1024 ** 3;

/** What the staged writes leave of the volume for everything else in it: a tenth, at least this. */
export const MIN_SCRATCH_MARGIN_BYTES = 256 * 1024 ** 2;

/**
 * The scratch volume's size limit: as the spec says, or the larger of 10 GiB and four times the
 * largest file the registry's indexes accept (`policy.maxFileSize`): room for a few uploads of
 * the largest at once. The kubelet evicts a pod whose scratch outgrows it, which is what keeps one
 * pod from filling its node's disk.
 */
export function scratchLimit(registry: PackageRegistry, largestFile: number | undefined): string {
  if (registry.spec.scratch?.sizeLimit !== undefined) return registry.spec.scratch.sizeLimit;
  return quantity(Math.max(DEFAULT_SCRATCH_LIMIT_BYTES, 4 * (largestFile ?? 0)));
}

/**
 * The registry's `[storage] scratch_limit` for a volume of `limit`: the volume less a margin for
 * what else lives in it (the temporary folder, archive walks, the scratch copies of a commit in
 * progress): a tenth of it, at least 256 MiB, never more than half. Null when the quantity does
 * not read (the API server's schema lets only quantities through, so: never).
 */
export function scratchBudgetBytes(limit: string): number | null {
  const bytes = quantityBytes(limit);
  if (bytes === null) return null;
  const margin = Math.min(Math.max(MIN_SCRATCH_MARGIN_BYTES, Math.ceil(bytes / 10)), Math.floor(bytes / 2));
  return bytes - margin > 0 ? bytes - margin : null;
}

const SUFFIX_BYTES: Record<string, number> = {
  '': 1,
  K: 1e3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity as whole bytes (rounded down): `"20Gi"`, `"500M"`, `"1.5Gi"`, `"1048576"`. */
export function quantityBytes(value: string): number | null {
  const m = /^([0-9]+(?:\.[0-9]+)?)([kKMGTPE]i?)?$/.exec(value.trim());
  const unit = SUFFIX_BYTES[m?.[2] ?? ''];
  if (!m || unit === undefined) return null;
  const bytes = Math.floor(Number(m[1]) * unit);
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : null;
}

/** Bytes as a Kubernetes quantity, in the largest binary unit that divides them ("20Gi"). */
export function quantity(bytes: number): string {
  for (const [unit, size] of [['Ti', 1024 ** 4], ['Gi', 1024 ** 3], ['Mi', 1024 ** 2], ['Ki', 1024]] as const) {
    if (bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return String(bytes);
}
