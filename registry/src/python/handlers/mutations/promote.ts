/**
 * `PUT /{route}/{project}/{version}/promote?from=<route>`: copies the uploaded files of one
 * release from the hosted layer of the `from` route into the hosted layer of this route (its
 * write target), e.g. from a staging index into a release index. Authentication is against the
 * target. Blobs are content-addressed and shared, so only records are copied; a copied record
 * keeps its bytes, metadata and upload time, and starts un-yanked. All files or none: a filename
 * the target holds with other bytes stops the whole promotion with 409.
 */
import { noteWrite } from '../../../access/auth.js';
import { readVerdict } from '../../../access/readers.js';
import { parseBasic } from '../../../access/secrets.js';
import { credentialLabel } from '../../../access/tokens.js';
import type { IndexConfig } from '../../../config/types.js';
import type { IndexRequest } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import { PolicyDenialError } from '../../../policy/denial.js';
import { membersOf } from '../../../roles/write-target.js';
import { writePolicy } from '../../read/policy/effective.js';
import { normalizeName, type FileRecord } from '../../model/records.js';
import { recordProjectWrite } from '../../status.js';
import { authorizeWrite } from './auth.js';
import { versionScope, type MutationDeps, type MutationResult } from './handler.js';

export async function handlePromote(deps: MutationDeps, req: IndexRequest, project: string, version: string): Promise<void> {
  const grant = authorizeWrite(deps, req.index, req, project);
  const { target } = grant;
  const source = sourceIndex(deps, req);
  const layers = membersOf(source, deps.indexByName).filter((m) => m.role === 'hosted');
  if (layers.includes(target)) {
    throw new HttpError(400, `from=${source.route} writes to the same hosted index (${target.name}) as this route; nothing to promote`);
  }
  const normalized = normalizeName(project);
  const inScope = versionScope(version);
  const { name, files } = await sourceFiles(deps, layers, normalized, inScope);
  if (files.length === 0) {
    throw new HttpError(404, `route ${source.route} has no uploaded files of ${normalized} ${version} to promote`);
  }
  const policy = writePolicy(req.index, target);
  for (const file of files) {
    const denial = policy.denial('upload', normalized, file);
    if (denial) throw new PolicyDenialError(denial);
  }
  // Promotion adds files to the target like an upload does.
  await deps.checkStatus(req.index, normalized, req.request.log);
  // The copies name bytes held long ago: touched before the records are written, and checked
  // after (lifecycle/collect.ts), so a collection racing a delete of the source never leaves a
  // record naming deleted bytes.
  const gone = await deps.holderOf(target.name).touchStored(files.flatMap((f) => (f.metadataSha256 ? [f.sha256, f.metadataSha256] : [f.sha256])));
  const lost = files.find((f) => gone.includes(f.sha256) || (f.metadataSha256 !== undefined && gone.includes(f.metadataSha256)));
  if (lost) throw new HttpError(409, `the bytes of ${lost.filename} are no longer stored (deleted meanwhile); nothing was promoted`);

  let added: string[] = [];
  let conflict: { filename: string; sha256: string } | null = null;
  await deps.records.update(target.name, normalized, (current) => {
    const doc = current ?? { name, files: {} };
    added = [];
    conflict = null;
    for (const file of files) {
      const there = doc.files[file.filename];
      if (there) {
        if (there.sha256 !== file.sha256) {
          conflict = { filename: file.filename, sha256: there.sha256 };
          return undefined;
        }
        continue;
      }
      const copy: FileRecord = { ...file };
      delete copy.yanked;
      doc.files[file.filename] = copy;
      added.push(file.filename);
    }
    return added.length > 0 ? doc : undefined;
  });
  const clash = conflict as { filename: string; sha256: string } | null;
  if (clash) {
    throw new HttpError(409, `${clash.filename} already exists in index ${target.name} with different content (sha256 ${clash.sha256}); nothing was promoted`);
  }
  if (added.length > 0) await recordProjectWrite(deps.summaries, deps.records, target.name, normalized, req.request.log);
  const result: MutationResult & { from: string } = { project: normalized, version, action: 'promote', from: source.route, changed: added.length, files: added.sort() };
  req.request.log.info({ index: req.index.name, target: target.name, from: source.name, project: normalized, version, changed: added.length }, 'python promote');
  noteWrite(req.request, deps.clientAddress, req.index, credentialLabel(grant.credential), `promote ${normalized} ${version} from ${source.route}`);
  await req.reply.code(200).type('application/json').send(result);
}

/** The index the `from` query names: a route of a Python index, slashes around it optional. */
function sourceIndex(deps: MutationDeps, req: IndexRequest): IndexConfig {
  const from = req.query.get('from');
  if (from === null || from.trim() === '') throw new HttpError(400, 'promotion needs ?from=<route> naming the source index route');
  const route = from.trim().replace(/^\/+|\/+$/g, '');
  const source = [...deps.indexByName.values()].find((ix) => ix.route === route);
  if (!source || source.ecosystem !== 'python') throw new HttpError(400, `from=${from} is not the route of a Python index`);
  // A promotion reads the source: from a private index, only with credentials that read it too.
  const password = parseBasic(req.request.headers.authorization)?.password;
  if (readVerdict(source, password, deps.indexByName).kind !== 'reads') {
    throw new HttpError(403, `from=${source.route} is private index "${source.name}", which these credentials may not read: promote with a token that reads it too`);
  }
  return source;
}

/** The release's files across the source's hosted layers; the first layer holding a filename wins. */
async function sourceFiles(
  deps: MutationDeps,
  layers: IndexConfig[],
  normalized: string,
  inScope: (file: FileRecord) => boolean,
): Promise<{ name: string; files: FileRecord[] }> {
  const byFilename = new Map<string, FileRecord>();
  let name = normalized;
  for (const layer of layers) {
    const loaded = await deps.records.get(layer.name, normalized);
    if (!loaded) continue;
    if (byFilename.size === 0) name = loaded.record.name;
    for (const file of Object.values(loaded.record.files)) {
      if (inScope(file) && !byFilename.has(file.filename)) byFilename.set(file.filename, file);
    }
  }
  return { name, files: [...byFilename.values()] };
}
