/**
 * What an index stores, as the dashboard and the status page show it: its size and object count
 * (the blobs it holds: files, pages, manifests, layers) and, where a hosted index has a quota or
 * a cached one a budget, how full it is, as a <meter> with the same words for screen readers. A
 * cached index may pass its budget until eviction catches up: the words then say more than 100 %
 * while the meter stops at its end.
 */
import type { LastCollection, StatusIndex, Stored } from './api.js';
import { h, type Child } from './dom.js';
import { bytes, duration, percent } from './format.js';

/** "12.3 MiB in 40 objects". */
export function storedText(s: Stored): string {
  return `${bytes(s.bytes)} in ${s.objects} ${s.objects === 1 ? 'object' : 'objects'}`;
}

/** The limit that applies to an index: a hosted index's quota or a cached index's budget. */
function limitOf(ix: StatusIndex): { bytes: number; kind: 'quota' | 'budget' } | null {
  if (ix.quota_bytes !== null) return { bytes: ix.quota_bytes, kind: 'quota' };
  if (ix.max_bytes !== null) return { bytes: ix.max_bytes, kind: 'budget' };
  return null;
}

/** The contents of an index's "stored" cell. */
export function storedCell(ix: StatusIndex): Child[] {
  if (ix.stored === null) return [h('small', {}, 'held by its members')];
  const parts: Child[] = [h('span', { class: 'size' }, storedText(ix.stored))];
  const limit = limitOf(ix);
  if (limit) {
    const words = `${percent(ix.stored.bytes, limit.bytes)} of ${bytes(limit.bytes)} ${limit.kind}`;
    parts.push(
      h(
        'span',
        { class: 'fill' },
        // Green while under 70 %, amber to 90 %, red beyond (optimum 0: emptier is better).
        h('meter', { min: 0, max: limit.bytes, low: 0.7 * limit.bytes, high: 0.9 * limit.bytes, optimum: 0, value: Math.min(ix.stored.bytes, limit.bytes), 'aria-label': `${ix.name} ${limit.kind}`, 'aria-valuetext': words }),
        ` ${words}`,
      ),
    );
  }
  if (ix.evict_unused_after_secs !== null) parts.push(h('small', { class: 'evict' }, `evicts what is not downloaded for ${duration(ix.evict_unused_after_secs)}`));
  return parts;
}

/** When the store's total was last counted exactly; until then the writes alone kept it. */
export function countedText(countedAt: string | null): string {
  return countedAt === null ? 'kept by the writes; not counted yet' : `counted exactly at ${new Date(countedAt).toLocaleString()}, kept by the writes since`;
}

/** The last garbage collection: when, how it ended, what it reclaimed or why it failed. */
export function lastCollection(run: LastCollection | null): Child[] {
  if (run === null) return ['none yet'];
  const when = new Date(run.ended_at).toLocaleString();
  const reclaimed = `reclaimed ${bytes(run.bytes_deleted)} in ${run.blobs_deleted} ${run.blobs_deleted === 1 ? 'blob' : 'blobs'}`;
  if (run.result === 'ok') return [`${when}: `, h('span', { class: 'good' }, 'ok'), `, ${reclaimed}`];
  // A failed run may have deleted some blobs before it stopped; the next run finishes the rest.
  const partly = run.blobs_deleted > 0 ? ` (${reclaimed} before it stopped)` : '';
  return [`${when}: `, h('span', { class: 'bad' }, 'failed'), partly, run.error ? ': ' : '', run.error ? h('span', { class: 'error' }, run.error) : ''];
}
