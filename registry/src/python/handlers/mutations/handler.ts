/**
 * `PUT|DELETE /{route}/{project}/[{version}/]yank`, `DELETE /{route}/{project}/[{version}/]` and
 * `PUT /{route}/{project}/[{version}/]restore`. A mutation touches two layers of the route:
 * the uploaded files in the write target's records, and (through a virtual route) cached files,
 * which get per-file overrides instead. The answer says how many files changed; zero is a
 * success too (the mutations are idempotent).
 */
import { noteWrite } from '../../../access/auth.js';
import { credentialLabel } from '../../../access/tokens.js';
import type { Holder } from '../../../storage/holds.js';
import type { IndexRequest, ServerContext } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { compareVersions } from '../../model/pep440.js';
import { normalizeName, type FileRecord, type ProjectRecords } from '../../model/records.js';
import { authorizeWrite, type WriteAccess } from './auth.js';
import { mutateRecord } from './hosted.js';
import type { ProjectOverrides } from '../../model/overrides.js';
import { yankReason } from './reason.js';
import type { CachedLayer } from '../../read/source/types.js';
import type { WriteStatusCheck } from '../../read/write-status.js';
import { recordProjectWrite } from '../../status.js';

export type MutationAction = 'yank' | 'unyank' | 'delete' | 'restore' | 'promote';

/** What the mutations use: the write check's services, the summaries and the webhook events, and the Python layers. */
export interface MutationDeps extends WriteAccess, Pick<ServerContext, 'summaries' | 'events'> {
  records: ProjectRecords;
  overrides: ProjectOverrides;
  /**
   * The holder of the index a write goes to (model/records.ts `pythonHolder`): a promotion
   * touches what it copies for its target (lifecycle/collect.ts), so the target holds it.
   */
  holderOf(indexName: string): Holder;
  /** Absent until the cached roles provide one: then only uploaded files are mutated. */
  cachedLayer?: CachedLayer;
  /** Refuses writes that add files to a project whose status (PEP 792) rejects them. */
  checkStatus: WriteStatusCheck;
}

export interface MutationResult {
  project: string;
  version?: string;
  action: MutationAction;
  changed: number;
  /** Filenames whose state changed. */
  files: string[];
}

export async function handleMutation(
  deps: MutationDeps,
  req: IndexRequest,
  action: Exclude<MutationAction, 'promote'>,
  project: string,
  version?: string,
): Promise<void> {
  const grant = authorizeWrite(deps, req.index, req, project);
  const { target } = grant;
  const normalized = normalizeName(project);
  const reason = action === 'yank' ? await yankReason(req) : '';
  const inScope = versionScope(version);

  // What exists in each layer, so "unknown project/version" and "not volatile" are decided
  // before anything is written.
  const hosted = Object.values((await deps.records.get(target.name, normalized))?.record.files ?? {});
  const cached = (await deps.cachedLayer?.files(req.index, normalized)) ?? [];
  if (hosted.length === 0 && cached.length === 0) throw new HttpError(404, `project "${normalized}" not found in index ${req.index.name}`);
  const hostedInScope = hosted.filter(inScope);
  const cachedInScope = cached.filter(inScope);
  if (version !== undefined && hostedInScope.length === 0 && cachedInScope.length === 0) {
    throw new HttpError(404, `project "${normalized}" has no version "${version}" in index ${req.index.name}`);
  }
  if (action === 'delete' && hostedInScope.length > 0 && !target.volatile) {
    throw new HttpError(
      403,
      `index ${target.name} is not volatile: uploaded files cannot be deleted (yank them instead, or set volatile = true on the index)`,
    );
  }

  const hostedChanged =
    hostedInScope.length > 0 && action !== 'restore'
      ? await mutateRecord(deps.records, target.name, normalized, inScope, action, reason)
      : [];
  const changed: string[] = [...hostedChanged];
  if (cachedInScope.length > 0) {
    changed.push(...(await deps.overrides.change(req.index.name, normalized, cachedInScope, action, reason)));
  }
  const result: MutationResult = { project: normalized, ...(version !== undefined ? { version } : {}), action, changed: changed.length, files: changed.sort() };
  req.request.log.info({ index: req.index.name, target: target.name, project: normalized, version, action, changed: changed.length }, `python ${action}`);
  noteWrite(req.request, deps.clientAddress, req.index, credentialLabel(grant.credential), `${action} ${normalized}${version !== undefined ? ` ${version}` : ''}`);
  if (hostedChanged.length > 0) await recordProjectWrite(deps.summaries, deps.records, target.name, normalized, req.request.log);
  if (changed.length > hostedChanged.length) await deps.summaries.recordAfterCommit(req.index.name, { changed: [normalized] }, req.request.log);
  if (changed.length > 0) {
    // Uploaded files change in the write target; cached files only through the route's overrides.
    const { actor } = grant;
    await deps.events.emit({
      event: action,
      index: req.index.name,
      route: req.index.route,
      localIndex: hostedChanged.length > 0 ? target.name : req.index.name,
      project: normalized,
      ...(version !== undefined ? { version } : {}),
      count: changed.length,
      ...(actor ? { actor } : {}),
      requestId: req.request.id,
    });
  }
  await req.reply.code(200).type('application/json').send(result);
}

/** Files of one version (PEP 440 equality: `1.1` is `1.1.0`), or every file without a version. */
export function versionScope(version: string | undefined): (file: Pick<FileRecord, 'version'>) => boolean {
  if (version === undefined) return () => true;
  return (file) => compareVersions(file.version, version) === 0;
}
