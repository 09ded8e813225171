/**
 * What the pods of a registry say about the bytes it stores and its last garbage collection
 * (`stored` of each index and of the whole registry, `gc.last_run` in `/+status`), as status
 * fields: `storedBytes`, `size` (the SIZE column) and `lastCollection`.
 *
 * Every pod counts the same bucket, but each refreshes its count on its own: the pod whose count
 * is the newest (`stored.counted_at`) is believed; without one, the first pod listed that answered.
 * A pod on an older image reports no `stored` at all; the fields are then left out, and the
 * caller keeps what an earlier reconcile found (a count does not vanish while pods roll).
 */
import type { LastCollection } from '../resources/types.js';
import type { PodReport, PodStatusDoc } from './pod-status.js';

export interface StoredState {
  storedBytes?: number;
  size?: string;
  lastCollection?: LastCollection;
}

/** The answering pods' documents, the newest count first (stable: on a tie, the first pod listed). */
function newestCountFirst(reports: readonly PodReport[]): PodStatusDoc[] {
  const docs = reports.flatMap((r) => (r.doc ? [r.doc] : []));
  const countedAt = (d: PodStatusDoc) => Date.parse(d.stored?.counted_at ?? '') || 0;
  return docs.map((doc, i) => ({ doc, i })).sort((a, b) => countedAt(b.doc) - countedAt(a.doc) || a.i - b.i).map((x) => x.doc);
}

/** Index `name`'s stored bytes (a blob it shares with another index counts in both). */
export function indexStored(reports: readonly PodReport[], name: string): StoredState {
  const docs = newestCountFirst(reports);
  const stored = docs.map((d) => d.indexes?.find((e) => e.name === name)?.stored).find((s) => s != null);
  return { ...bytes(stored?.bytes), ...collection(docs) };
}

/** The registry's stored bytes in all (a blob two indexes hold counts once). */
export function registryStored(reports: readonly PodReport[]): StoredState {
  const docs = newestCountFirst(reports);
  const stored = docs.map((d) => d.stored).find((s) => s != null);
  return { ...bytes(stored?.bytes), ...collection(docs) };
}

/**
 * `current` over what the previous status said: a pod that does not report a count (an older image,
 * none answering) leaves the last count standing rather than blanking the SIZE column.
 */
export function overPrevious(previous: StoredState | undefined, current: StoredState): StoredState {
  const kept: StoredState = {
    ...(previous?.storedBytes !== undefined ? { storedBytes: previous.storedBytes } : {}),
    ...(previous?.size !== undefined ? { size: previous.size } : {}),
    ...(previous?.lastCollection !== undefined ? { lastCollection: previous.lastCollection } : {}),
  };
  return { ...kept, ...current };
}

function bytes(n: number | undefined): StoredState {
  return n !== undefined && Number.isSafeInteger(n) && n >= 0 ? { storedBytes: n, size: humanSize(n) } : {};
}

/** The collection that ended last, whichever pod ran it (one collection covers the whole registry). */
function collection(docs: readonly PodStatusDoc[]): StoredState {
  let last: LastCollection | undefined;
  for (const d of docs) {
    const run = d.gc?.last_run;
    if (!run || Number.isNaN(Date.parse(run.ended_at))) continue;
    if (last && Date.parse(last.time) >= Date.parse(run.ended_at)) continue;
    last = { time: new Date(run.ended_at).toISOString().replace(/\.\d{3}Z$/, 'Z'), result: run.result === 'ok' ? 'ok' : 'failed', reclaimedBytes: run.bytes_deleted ?? 0 };
  }
  return last ? { lastCollection: last } : {};
}

const BINARY_UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'] as const;

/** Bytes for people: "512 B" under a KiB, else binary units with one decimal ("12.3 MiB", "1.0 GiB"). */
export function humanSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  let value = bytes / 1024;
  let unit = 0;
  // Promote once the value would print as 1024.0 of a unit (1023.96 KiB reads as "1.0 MiB").
  while (unit < BINARY_UNITS.length - 1 && Math.round(value * 10) / 10 >= 1024) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${BINARY_UNITS[unit] ?? 'EiB'}`;
}
