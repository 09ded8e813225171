/**
 * `POST /{route}/`: the legacy upload API of a hosted Python index (what `twine upload` and
 * `uv publish` send). Order matters: authenticate before the body is read; stage the file in the
 * store while hashing it; validate from the stage; only then commit the blobs and add the file
 * record. Any refusal leaves nothing visible and nothing staged.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { checkWrite, grantRefusal, noteWrite } from '../../../access/auth.js';
import { refusedWrite } from '../write-refusal.js';
import { credentialLabel } from '../../../access/tokens.js';
import type { IndexRequest, ServerContext } from '../../../ecosystem/ecosystem.js';
import { HttpError } from '../../../http/errors.js';
import type { IndexConfig } from '../../../config/types.js';
import { sizeDenial } from '../../../policy/rules.js';
import { writeTarget } from '../../../roles/write-target.js';
import { normalizeVersion } from '../../model/pep440.js';
import type { WriteStatusCheck } from '../../read/write-status.js';
import { writePolicy } from '../../read/policy/effective.js';
import { normalizeName, ProjectRecords, pythonHolder, type FileRecord } from '../../model/records.js';
import { discardRest } from './body.js';
import { checkClaimedDigests } from './digests.js';
import { badUpload, PolicyDenialError, reasonPhraseOf } from './errors.js';
import { FILETYPE } from '../../model/filenames.js';
import { FileTooLargeError, readUploadForm, type StagedFile, type UploadForm } from './multipart.js';
import { validateSdist } from './sdist.js';
import { validateWheel, type ValidatedArchive } from './wheel.js';
import { recordProjectWrite } from '../../status.js';
import { ensureQuota, ensureRoom } from './quota.js';

/**
 * What an upload uses of the server's services: the write check's (indexes, client address), the
 * stores, the usage counters, the summaries and the webhook events.
 */
export type UploadServices = Pick<ServerContext, 'indexByName' | 'clientAddress' | 'stores' | 'counters' | 'summaries' | 'events' | 'usage'>;

export async function handleUpload(services: UploadServices, req: IndexRequest, checkStatus: WriteStatusCheck): Promise<void> {
  const { request, reply } = req;
  try {
    const accepted = await upload(services, req, checkStatus);
    await reply.code(200).type('application/json').send(accepted);
  } catch (err) {
    discardRest(request);
    // twine prints the reason phrase, not the body: put the message where the user will see it.
    // (A policy denial's is set by Python's table, answers.ts, which also sends its denial object.)
    if (err instanceof HttpError) reply.raw.statusMessage = reasonPhraseOf(err.message);
    throw err;
  }
}

interface Accepted {
  ok: true;
  project: string;
  version: string;
  filename: string;
  sha256: string;
  size: number;
  /** True when the same bytes were already there under this filename (nothing changed). */
  duplicate: boolean;
}

async function upload(services: UploadServices, { index, request }: IndexRequest, checkStatus: WriteStatusCheck): Promise<Accepted> {
  const auth = checkWrite(writeTarget(index, services.indexByName), request.headers.authorization, { scope: 'upload' });
  if (!auth.ok) throw refusedWrite(request, services.clientAddress, index, auth);
  const { target } = auth;
  if (!/^multipart\/form-data(?:\s*;|\s*$)/i.test(request.headers['content-type'] ?? '')) {
    throw badUpload('an upload must be a multipart/form-data form (the upload API that twine and uv publish use)');
  }

  ensureRoom(services, target, request);
  const policy = writePolicy(index, target);
  const maxFileSize = policy.maxFileSize;
  let form: UploadForm;
  try {
    form = await readUploadForm(request, services.stores.blobs, maxFileSize);
  } catch (err) {
    if (err instanceof FileTooLargeError) {
      const { project, filename, version } = err.artifact;
      throw new PolicyDenialError(sizeDenial({ action: 'upload', project, filename, version }, err.limit));
    }
    throw err;
  }
  try {
    // A named token may reach some projects only: known once the form named the file.
    const outOfScope = grantRefusal(auth, 'upload', form.file.name.project, normalizeName);
    if (outOfScope) throw refusedWrite(request, services.clientAddress, index, outOfScope);
    const denied = policy.projectDenial('upload', form.file.name.project);
    if (denied) throw new PolicyDenialError({ ...denied, filename: form.file.name.filename, version: form.file.name.version });
    // The status this route shows for the project (PEP 792), e.g. quarantined by an upstream.
    await checkStatus(index, form.file.name.project, request.log);
    checkFormFields(form);
    const { stage } = form.file;
    await checkClaimedDigests(form.fields, form.file.name.filename, () => stage.readBack(), { ...form.file.digests, sha256: form.file.sha256 });
    const archive = form.file.name.kind === 'wheel'
      ? await validateWheel(stage, form.file.name)
      : await validateSdist(stage, form.file.name);
    await ensureQuota(services, target, request, archive.meta.project, form.file.name.filename, form.file.size + archive.metadata.length);
    const duplicate = await publish(services.stores, target, form.file, archive, credentialLabel(auth.credential));
    request.log.info(
      { index: target.name, project: archive.meta.project, filename: form.file.name.filename, sha256: form.file.sha256, size: form.file.size, duplicate },
      duplicate ? 'upload repeated identical file' : 'upload accepted',
    );
    noteWrite(request, services.clientAddress, index, credentialLabel(auth.credential), `upload ${form.file.name.filename}${duplicate ? ' (identical, already stored)' : ''}`);
    if (!duplicate) {
      // A duplicate changes nothing (as for webhooks): it is not counted as an upload.
      services.counters.index(index.route).add('uploads', 1, archive.meta.project);
      await recordProjectWrite(services.summaries, new ProjectRecords(services.stores.meta), target.name, archive.meta.project, request.log, [form.file.name.filename]);
      await services.events.emit({
        event: 'upload',
        index: index.name,
        route: index.route,
        localIndex: target.name,
        project: archive.meta.project,
        version: archive.meta.version,
        count: 1,
        file: { filename: form.file.name.filename, sha256: form.file.sha256 },
        actor: auth.actor,
        requestId: request.id,
      });
    }
    return {
      ok: true,
      project: archive.meta.project,
      version: archive.meta.version,
      filename: form.file.name.filename,
      sha256: form.file.sha256,
      size: form.file.size,
      duplicate,
    };
  } finally {
    // Discards the staged bytes unless `publish` committed them.
    await form.file.stage.abort();
  }
}

/** The form's own claims (name, version, filetype) must agree with the file; digests are checked apart. */
function checkFormFields({ fields, file }: UploadForm): void {
  const one = (key: string): string | undefined => fields.get(key)?.[0];
  const required = (key: string): string => {
    const value = one(key);
    if (value === undefined || value.trim() === '') throw badUpload(`the form has no "${key}" field`);
    return value.trim();
  };
  const { name } = file;
  const action = one(':action');
  if (action !== undefined && action !== 'file_upload') throw badUpload(`unsupported :action ${JSON.stringify(action)}; only file_upload is supported`);

  const formName = required('name');
  if (normalizeName(formName) !== name.project) {
    throw badUpload(`the form says name=${formName}, but ${name.filename} is a file of project ${name.project}`);
  }
  const formVersion = required('version');
  if (normalizeVersion(formVersion) !== name.version) {
    throw badUpload(`the form says version=${formVersion}, but ${name.filename} has version ${name.version}`);
  }
  const filetype = required('filetype');
  const expected = FILETYPE[name.kind];
  if (filetype !== expected) {
    throw badUpload(`the form says filetype=${filetype}, but ${name.filename} is ${name.kind === 'wheel' ? 'a wheel' : 'an sdist'} (filetype=${expected})`);
  }
}

function alreadyExists(filename: string, sha256: string): HttpError {
  return badUpload(`${filename} already exists on this index with different content (sha256 ${sha256}); an uploaded file cannot be replaced, upload a new version instead`);
}

/** Makes the upload visible. Returns true when the identical file was already there. */
async function publish(stores: UploadServices['stores'], target: IndexConfig, file: StagedFile, archive: ValidatedArchive, uploadedBy: string): Promise<boolean> {
  const records = new ProjectRecords(stores.meta);
  const { blobs, holds } = stores;
  const { meta } = archive;
  const holder = pythonHolder(target.name);
  const filename = file.name.filename;
  const before = (await records.get(target.name, meta.project))?.record.files[filename];
  if (before) {
    if (before.sha256 !== file.sha256) throw alreadyExists(filename, before.sha256);
    // The same bytes again: also the way to restore a file whose blob went missing.
    await holds.hold(file.sha256, holder, file.size);
    if (!(await blobs.stat(file.sha256))) await file.stage.commit(file.sha256);
    return true;
  }

  // Held before stored, so a concurrent release by another ecosystem cannot delete them.
  const metadataSha256 = createHash('sha256').update(archive.metadata).digest('hex');
  await holds.hold(file.sha256, holder, file.size);
  await holds.hold(metadataSha256, holder, archive.metadata.length);
  await file.stage.commit(file.sha256);
  const metadataBlob = await blobs.put(Readable.from([archive.metadata]), metadataSha256);
  const record: FileRecord = {
    filename,
    version: meta.version,
    kind: file.name.kind,
    sha256: file.sha256,
    size: file.size,
    ...(meta.requiresPython !== undefined ? { requiresPython: meta.requiresPython } : {}),
    uploadTime: new Date().toISOString(),
    uploadedBy,
    metadataSha256: metadataBlob.digest,
  };
  const result = await records.update(target.name, meta.project, (current) => {
    const doc = current ?? { name: meta.name, files: {} };
    if (doc.files[filename]) return undefined;
    doc.files[filename] = record;
    return doc;
  });
  // A concurrent upload of the same filename may have won the race.
  const landed = result.doc?.files[filename];
  if (!landed) throw new Error(`record of ${filename} missing after update`);
  if (landed.sha256 !== file.sha256) throw alreadyExists(filename, landed.sha256);
  return !result.changed;
}
