/**
 * What a pod of a registry answers on `GET /+status`, the part the operator reads (the registry
 * serves more), and the report of one pod's answer. The fields that came with the storage
 * lifecycle (`stored`, `gc`) are optional: a pod on an older image answers without them.
 */

export interface PodStatusDoc {
  instance?: string;
  /** The registry's version (its image's). */
  version?: string;
  indexes?: Array<{ name: string; route?: string; serial?: number; upstream?: { offline?: boolean; online?: number; total?: number }; stored?: StoredCount | null }>;
  /** The registry's total: a blob two indexes hold counts once; `counted_at` null before the first count. */
  stored?: (StoredCount & { counted_at?: string | null }) | null;
  gc?: { last_run?: GcRun | null } | null;
}

export interface StoredCount {
  bytes: number;
  objects: number;
}

/** The last garbage collection a pod knows of. */
export interface GcRun {
  ended_at: string;
  result: 'ok' | 'failed';
  bytes_deleted?: number;
  blobs_deleted?: number;
  error?: string;
}

/**
 * The versions the answering pods run, oldest spelling first and each once ("0.1.0", or
 * "0.1.0, 0.2.0" while a roll to a new image is under way); undefined when none says.
 */
export function runningVersions(reports: readonly PodReport[]): string | undefined {
  const versions = [...new Set(reports.flatMap((r) => (typeof r.doc?.version === 'string' ? [r.doc.version.slice(0, 64)] : [])))].sort();
  return versions.length > 0 ? versions.join(', ') : undefined;
}

export interface PodReport {
  pod: string;
  /** null when the pod did not answer (its message says why). */
  doc: PodStatusDoc | null;
  error?: string;
}
