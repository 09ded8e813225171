/**
 * Reads the legacy upload form (`multipart/form-data`, as twine and `uv publish` send it) without
 * holding the file in memory: the `content` part is streamed to a spool file while it is hashed
 * and counted. Its filename is checked as soon as the part starts, so a wrong name or type is
 * refused before its bytes are read.
 */
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyRequest } from 'fastify';
import { HashingStream } from '../../storage/hashing.js';
import { badUpload } from './errors.js';
import { parseArtifactName, type ArtifactName } from './filenames.js';
import { ByteLimit } from './limits.js';

/**
 * All text fields of one form together (a long README in `description` included). The per-field
 * limit is set where the multipart plugin is registered; this caps their sum.
 */
const MAX_FIELD_BYTES = 16 * 1024 * 1024;

/** Extra file parts (e.g. a `gpg_signature`) are read and dropped, up to this size. */
const MAX_OTHER_FILE = 1024 * 1024;

export interface SpooledFile {
  /** Where the bytes are; the caller deletes it. */
  path: string;
  name: ArtifactName;
  size: number;
  sha256: string;
}

export interface UploadForm {
  /** Text fields by name, in the order they came. */
  fields: Map<string, string[]>;
  file: SpooledFile;
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

/** Reads the whole form. On any failure nothing is left in the spool folder. */
export async function readUploadForm(request: FastifyRequest, spoolDir: string, maxFileSize: number | undefined): Promise<UploadForm> {
  const fields = new Map<string, string[]>();
  let fieldBytes = 0;
  let file: SpooledFile | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'field') {
        if (part.valueTruncated) throw badUpload(`form field ${part.fieldname} is too long`);
        const value = typeof part.value === 'string' ? part.value : JSON.stringify(part.value);
        fieldBytes += value.length;
        if (fieldBytes > MAX_FIELD_BYTES) throw badUpload(`the form's text fields exceed ${MAX_FIELD_BYTES} bytes in all`);
        const values = fields.get(part.fieldname) ?? [];
        values.push(value);
        fields.set(part.fieldname, values);
      } else if (part.fieldname === 'content') {
        if (file) throw badUpload('the form has more than one "content" file part; upload one file per request');
        const name = parseArtifactName(part.filename);
        file = await spool(part.file, join(spoolDir, `upload-${randomUUID()}`), name, maxFileSize);
      } else {
        await discardPart(part.file, part.fieldname);
      }
    }
    if (!request.raw.complete) throw badUpload('the upload body ended early');
    if (!file) throw badUpload('the form has no "content" file part');
    return { fields, file };
  } catch (err) {
    if (file) await rm(file.path, { force: true });
    throw err;
  }
}

async function spool(source: Readable, path: string, name: ArtifactName, maxFileSize: number | undefined): Promise<SpooledFile> {
  const hasher = new HashingStream();
  try {
    // Without a limit the pass-through costs nothing worth a second code path.
    await pipeline(source, new ByteLimit(maxFileSize ?? Number.POSITIVE_INFINITY, () => new FileTooLargeError(name, maxFileSize ?? 0)), hasher, createWriteStream(path, { flags: 'wx' }));
  } catch (err) {
    await rm(path, { force: true });
    if (err instanceof FileTooLargeError || isSystemError(err)) throw err;
    throw badUpload(`the upload of ${name.filename} did not arrive whole: ${err instanceof Error ? err.message : String(err)}`);
  }
  return { path, name, size: hasher.size, sha256: hasher.digest() };
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
