/**
 * What a DELETE of a tag or a manifest does once it is authorised: the one path that a client's
 * DELETE (manifests.ts) and a retention run (oci/lifecycle/) both take, so both release the same
 * holds, update the same referrer lists, catalog and status summary, and send the same webhook
 * events. Neither writes a reply: the caller answers (a 202, or a line of the retention report).
 *
 * Both send `delete` to the webhooks: `project` is the repository, `file` the manifest
 * (`filename` its digest); a tag's removal also names the tag as the `version`.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { HostedIndex, IndexConfig } from '../../config/types.js';
import type { EventSink } from '../../events/types.js';
import type { IndexSummaries } from '../../observe/summary.js';
import type { BlobBytes } from '../read/blob-bytes.js';
import { referencingManifest } from '../read/hosted/references.js';
import type { IndexHolds } from '../read/index-holds.js';
import type { Members } from '../read/virtual/members.js';
import { recordManifestWrite } from '../status.js';

export interface RemovalServices {
  members: Members;
  holds: IndexHolds;
  blobBytes: BlobBytes;
  summaries: IndexSummaries;
  events: EventSink;
}

/** Who asked, for the webhook payload and the log. */
export interface RemovalOrigin {
  /** The index the request came through (a virtual route's, or `hosted` itself). */
  via: IndexConfig;
  /** The Basic user name of the writer; absent for a retention run. */
  actor?: string;
  requestId?: string;
  log: FastifyBaseLogger;
}

/**
 * Removes tag `tag` from repository `repo` of `hosted`; the hex it named, or undefined when there
 * was no such tag (or, with `onlyIf`, it named another manifest by then: nothing changed).
 */
export async function removeTag(s: RemovalServices, hosted: HostedIndex, repo: readonly string[], tag: string, origin: RemovalOrigin, onlyIf?: string): Promise<string | undefined> {
  const repos = s.members.hosted(hosted);
  const hex = await repos.deleteTag(repo, tag, onlyIf);
  if (hex === undefined) return undefined;
  await recordManifestWrite(s.summaries, repos, repo, origin.log);
  await s.events.emit(deleteEvent(hosted, repo, hex, origin, tag));
  return hex;
}

/**
 * Removes manifest `hex` from repository `repo` of `hosted`: its record, the tags that name it,
 * its referrer entry; then the repository's hold on its bytes (they go with the last holder),
 * unless another manifest of the repository names it (an index listing it as a child): a delete
 * never takes bytes a manifest still names. The blobs it named stay held by the repository (a
 * blob DELETE, or a collector, lets them go). False when the repository has no such manifest.
 */
export async function removeManifest(s: RemovalServices, hosted: HostedIndex, repo: readonly string[], hex: string, origin: RemovalOrigin): Promise<boolean> {
  const repos = s.members.hosted(hosted);
  if (!(await repos.deleteManifest(repo, hex))) return false;
  if ((await referencingManifest({ repos, holds: s.holds, blobBytes: s.blobBytes }, repo, hex)) === undefined) {
    const released = await s.holds.ofRepo(hosted.name, repo).release(hex);
    if (released.last) s.blobBytes.forget(hex);
  }
  await recordManifestWrite(s.summaries, repos, repo, origin.log);
  await s.events.emit(deleteEvent(hosted, repo, hex, origin));
  return true;
}

function deleteEvent(hosted: HostedIndex, repo: readonly string[], hex: string, origin: RemovalOrigin, tag?: string) {
  return {
    event: 'delete' as const,
    index: origin.via.name,
    route: origin.via.route,
    localIndex: hosted.name,
    project: repo.join('/'),
    ...(tag !== undefined ? { version: tag } : {}),
    count: 1,
    file: { filename: `sha256:${hex}`, sha256: hex },
    ...(origin.actor !== undefined ? { actor: origin.actor } : {}),
    ...(origin.requestId !== undefined ? { requestId: origin.requestId } : {}),
  };
}
