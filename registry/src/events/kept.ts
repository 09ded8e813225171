/**
 * What a cached index tells when it serves on a copy its upstream deleted
 * (`upstream_deletions = "keep"`, roles/revalidator.ts), and when that ends: the mark in its
 * `/+status` summary (observe/summary.ts `kept`), and, once per kept copy, the webhook event
 * `kept_after_upstream_delete`. The ecosystem says what was kept, in its own words (a project,
 * a repository and tag); it is told once per mark, by the refresh that set it, so nothing here
 * runs per request.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { IndexConfig } from '../config/types.js';
import type { IndexSummaries } from '../observe/summary.js';
import type { EventSink } from './types.js';

/** One kept copy, as its ecosystem names it. */
export interface KeptItem {
  /** Its name in `/+status` (`kept`): a project, or `repository:tag`. */
  name: string;
  /** The event's `project`: the project, or the repository. */
  project: string;
  /** The event's `version`: a tag. */
  version?: string;
  /** The event's `file`: what the kept copy is (a tag's manifest digest). */
  file?: { filename: string; sha256: string };
}

/** Told when `item` of `index` is kept since `since` (ms), or no longer (null). Never throws. */
export type KeptListener = (index: IndexConfig, item: KeptItem, since: number | null) => void;

export function keptReporter(summaries: IndexSummaries, events: EventSink, log: FastifyBaseLogger): KeptListener {
  return (index, item, since) => {
    if (since !== null) {
      log.info({ event: 'kept_after_upstream_delete', index: index.route, name: item.name }, 'the upstream no longer has it: the cached copy is kept');
    }
    const marked = summaries.markKept(index.name, item.name, since).catch((err: unknown) => {
      log.warn({ index: index.name, name: item.name, err: err instanceof Error ? err.message : String(err) }, 'status summary not updated (kept copies)');
    });
    if (since === null) return;
    void marked.then(() =>
      events.emit({
        event: 'kept_after_upstream_delete',
        index: index.name,
        route: index.route,
        localIndex: index.name,
        project: item.project,
        ...(item.version !== undefined ? { version: item.version } : {}),
        count: 1,
        ...(item.file ? { file: item.file } : {}),
      }),
    );
  };
}
