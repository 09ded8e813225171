/**
 * Reads the legacy upload form (`multipart/form-data`, as twine and `uv publish` send it) without
 * holding the file in memory: the `content` part is streamed into a staged write of the store
 * (`BlobStage`), which hashes and counts it. Its filename is checked as soon as the part starts,
 * so a wrong name or type is refused before its bytes are read. Text fields are bounded by their
 * total size and a generous count (twine sends one per classifier and per requirement), each
 * refused with 400 at once.
 */
import { pipeline as pipe, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyRequest } from 'fastify';
import { declaredLength } from '../../../http/declared-length.js';
import { ScratchBusyError, ScratchTooLargeError } from '../../../storage/scratch-budget.js';
import type { BlobStage, BlobStore } from '../../../storage/types.js';
import { ArtifactHashing, claimedExtraDigests, type ExtraDigest } from './digests.js';
import { badUpload } from './errors.js';
import { parseArtifactName, type ArtifactName } from '../../model/filenames.js';
import { readFormParts, type FormPart } from './form-parts.js';
import { ByteLimit } from './limits.js';

/**
 * All text fields of one form together (a long README in `description` included), names and
 * values: this bounds the memory a form's fields take.
 */
export const MAX_FIELD_BYTES = 16 * 1024 * 1024;
/**
 * Text fields of one form. Far above a real upload (twine sends one per classifier, requirement
 * and extra; PyPI knows under a thousand classifiers), and low enough that a flood of empty
 * fields is refused before it costs much parsing.
 */
export const MAX_FIELDS = 10_000;

/** Extra file parts (e.g. a `gpg_signature`) are read and dropped, up to this size. */
const MAX_OTHER_FILE = 1024 * 1024;

export interface StagedFile {
  /** The bytes, staged in the store and readable back; the caller commits or aborts it. */
  stage: BlobStage;
  name: ArtifactName;
  size: number;
  sha256: string;
  /** The extra digests computed on the way (only those the form claimed before the file). */
  digests: Partial<Record<ExtraDigest, string>>;
}

export interface UploadForm {
  /** Text fields by name, in the order they came. */
  fields: Map<string, string[]>;
  file: StagedFile;
}

/** The file is larger than the policy allows; reading stopped at the limit. */
export class FileTooLargeError extends Error {
  constructor(
    readonly artifact: ArtifactName,
    readonly limit: number,
  ) {
    super(`${artifact.filename} is larger than ${limit} bytes`);
    this.name = 'FileTooLargeError';
  }
}

/**
 * Reads the whole form. On any failure the stage is aborted: nothing is left staged.
 *
 * The stage begins before the first byte of the form is read, with the request's Content-Length
 * (when it has one) reserved from the scratch budget (storage/scratch-budget.ts): the file is
 * smaller than the form that carries it, so a form that cannot fit is refused before anything is
 * read, and one that fits waits for room rather than failing midway. Read back for validation
 * (the wheel's zip directory is at its end).
 */
export async function readUploadForm(request: FastifyRequest, blobs: BlobStore, maxFileSize: number | undefined): Promise<UploadForm> {
  const fields = new Map<string, string[]>();
  let fieldBudget = MAX_FIELD_BYTES;
  let fieldCount = 0;
  let file: StagedFile | undefined;
  const declared = declaredLength(request.headers);
  const staging: BlobStage = await blobs.stage({ readBack: true, ...(declared === undefined ? {} : { declared }) });

  const onPart = async ({ name, filename, stream }: FormPart): Promise<void> => {
    if (name === 'content') {
      if (file) throw badUpload('the form has more than one "content" file part; upload one file per request');
      if (filename === undefined) throw badUpload('the "content" part has no filename; send the file as a file part named after the artifact');
      const artifact = parseArtifactName(filename);
      file = await stageFile(stream, staging, artifact, maxFileSize, claimedExtraDigests(fields));
    } else if (filename !== undefined) {
      await discardPart(stream, name ?? '');
    } else {
      if (++fieldCount > MAX_FIELDS) throw badUpload(`the form has more than ${MAX_FIELDS} text fields`);
      fieldBudget -= Buffer.byteLength(name ?? '');
      if (fieldBudget < 0) throw fieldsTooLarge();
      const { value, size } = await readText(stream, fieldBudget);
      fieldBudget -= size;
      // A part without a name carries nothing a client means; it still counted against the bound.
      if (name === undefined) return;
      const values = fields.get(name) ?? [];
      values.push(value);
      fields.set(name, values);
    }
  };

  try {
    await readFormParts(request.raw, onPart);
    if (!file) throw badUpload('the form has no "content" file part');
    return { fields, file };
  } catch (err) {
    await staging.abort();
    throw err;
  }
}

function fieldsTooLarge() {
  return badUpload(`the form's text fields exceed ${MAX_FIELD_BYTES} bytes in all (names and values)`);
}

/** One text field's value as UTF-8 and its size on the wire; fails as soon as the budget is spent. */
async function readText(stream: Readable, budget: number): Promise<{ value: string; size: number }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > budget) throw fieldsTooLarge();
    chunks.push(chunk as Buffer);
  }
  return { value: Buffer.concat(chunks).toString('utf8'), size };
}

async function stageFile(source: Readable, stage: BlobStage, name: ArtifactName, maxFileSize: number | undefined, extra: ExtraDigest[]): Promise<StagedFile> {
  const hashing = await ArtifactHashing.create(extra);
  try {
    // Without a limit the pass-through costs nothing worth a second code path. A failure anywhere
    // destroys every stream of the chain, so the stage's append rejects with it.
    const limited = pipe(source, new ByteLimit(maxFileSize ?? Number.POSITIVE_INFINITY, () => new FileTooLargeError(name, maxFileSize ?? 0)), hashing, () => undefined);
    await stage.append(limited);
  } catch (err) {
    // Past the scratch budget is the server's refusal (413 or 503), not a broken upload.
    if (err instanceof FileTooLargeError || err instanceof ScratchTooLargeError || err instanceof ScratchBusyError || isSystemError(err)) throw err;
    throw badUpload(`the upload of ${name.filename} did not arrive whole: ${err instanceof Error ? err.message : String(err)}`);
  }
  return { stage, name, size: stage.size, sha256: stage.digest(), digests: hashing.digests() };
}

async function discardPart(source: Readable, field: string): Promise<void> {
  let seen = 0;
  await pipeline(
    source,
    new Writable({
      write(chunk: Buffer, _enc, next) {
        seen += chunk.length;
        next(seen > MAX_OTHER_FILE ? badUpload(`unexpected file part ${JSON.stringify(field)} is too large`) : null);
      },
    }),
  );
}

/** A failure of this machine (disk full, permissions), not of the request: a 500, not a 400. */
function isSystemError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) && (err as NodeJS.ErrnoException).syscall !== undefined;
}
