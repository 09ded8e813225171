/**
 * Validates a staged sdist before anything becomes visible: the gzip is inflated as a stream
 * into tar-stream (never held whole), with the member count and the inflated size bounded. The
 * archive must hold exactly one top-level directory `{name}-{version}/` matching the filename,
 * with `PKG-INFO` and `pyproject.toml` in it, and no member that could escape on extraction.
 */
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import tar, { type Extract } from 'tar-stream';
import { HttpError } from '../../../http/errors.js';
import { checkAgainstFilename, parseCoreMetadata, requiresLicenseFiles } from '../../model/core-metadata.js';
import { badUpload } from './errors.js';
import type { SdistName } from '../../model/filenames.js';
import { ByteLimit, MAX_MEMBERS, MAX_METADATA_BYTES, maxExpandedBytes } from './limits.js';
import { segmentsOf, unsafeMemberReason } from '../../../http/member-path.js';
import type { ValidatedArchive } from './wheel.js';
import type { BlobStage } from '../../../storage/types.js';

export async function validateSdist(stage: BlobStage, name: SdistName): Promise<ValidatedArchive> {
  const where = name.filename;
  const size = stage.size;
  const extract = tar.extract();
  const inflated = pipeline(stage.readBack(), createGunzip(), new ByteLimit(maxExpandedBytes(size), () => badUpload(`${where} expands to more than ${maxExpandedBytes(size)} bytes; refused as a possible gzip bomb`)), extract);
  // Its failure also ends the iteration below with the same error; it is awaited after that.
  inflated.catch(() => undefined);
  try {
    const result = await scan(extract, name);
    await inflated;
    return result;
  } catch (err) {
    extract.destroy();
    if (err instanceof HttpError) throw err;
    throw badUpload(`${where} is not a valid .tar.gz archive: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** One member as tar-stream yields it (the package does not export the type by name). */
type TarEntry = Extract extends AsyncIterable<infer S> ? S : never;

async function scan(extract: Extract, name: SdistName): Promise<ValidatedArchive> {
  const where = name.filename;
  const top = `${name.rawName}-${name.version}`;
  /** Regular files and hard links, relative to the top-level directory. */
  const files = new Set<string>();
  let pkgInfo: Buffer | undefined;
  let members = 0;

  for await (const entry of extract) {
    const { header } = entry;
    if (++members > MAX_MEMBERS) throw badUpload(`${where} has more than ${MAX_MEMBERS} members`);
    const member = header.name;
    const unsafe = unsafeMemberReason(member);
    if (unsafe) throw badUpload(`${where} has an unsafe member ${JSON.stringify(member)} (${unsafe})`);
    const segments = segmentsOf(member);
    const type = header.type ?? 'file';
    if (segments.length === 0 && type === 'directory') {
      await drain(entry);
      continue;
    }
    if (segments[0] !== top) {
      throw badUpload(`${where} must contain exactly one top-level directory, ${top}/ (named like the file), but it has ${JSON.stringify(segments[0] ?? member)}`);
    }
    const rel = segments.slice(1).join('/');
    if (rel === '' && type !== 'directory') throw badUpload(`${where}: the top-level ${top} must be a directory`);

    switch (type) {
      case 'directory':
        break;
      case 'file':
      case 'contiguous-file':
        if (files.has(rel)) throw badUpload(`${where} has the member ${member} twice`);
        files.add(rel);
        if (rel === 'PKG-INFO') {
          pkgInfo = await readSmall(entry, header.size ?? 0, `${top}/PKG-INFO`, where);
          continue;
        }
        break;
      case 'symlink':
        checkSymlink(member, segments, header.linkname ?? '', top, where);
        break;
      case 'link': {
        const target = header.linkname ?? '';
        const targetSegments = segmentsOf(target);
        if (unsafeMemberReason(target) !== null || targetSegments[0] !== top || targetSegments.length < 2) {
          throw badUpload(`${where}: hard link ${member} points outside ${top}/ (${JSON.stringify(target)})`);
        }
        if (files.has(rel)) throw badUpload(`${where} has the member ${member} twice`);
        files.add(rel);
        break;
      }
      default:
        throw badUpload(`${where}: member ${member} is a ${type}; only files, directories and links inside ${top}/ are accepted`);
    }
    if ((rel === 'PKG-INFO' || rel === 'pyproject.toml') && type !== 'file' && type !== 'contiguous-file') {
      throw badUpload(`${where}: ${member} must be a regular file`);
    }
    await drain(entry);
  }

  if (members === 0) throw badUpload(`${where} is an empty archive`);
  if (!files.has('pyproject.toml')) throw badUpload(`${where} has no ${top}/pyproject.toml`);
  if (!pkgInfo) throw badUpload(`${where} has no ${top}/PKG-INFO`);
  const meta = parseCoreMetadata(pkgInfo, `${top}/PKG-INFO`);
  checkAgainstFilename(meta, name, `${top}/PKG-INFO`);
  if (requiresLicenseFiles(meta)) {
    for (const licenseFile of meta.licenseFiles) {
      if (unsafeMemberReason(licenseFile) !== null || !files.has(segmentsOf(licenseFile).join('/'))) {
        throw badUpload(`${where}: ${top}/PKG-INFO (Metadata-Version 2.4+) names License-File ${licenseFile}, which is not in the archive`);
      }
    }
  }
  return { meta, metadata: pkgInfo };
}

/** A symlink must resolve inside the top-level directory without passing outside it on the way. */
function checkSymlink(member: string, segments: string[], target: string, top: string, where: string): void {
  const refuse = () => badUpload(`${where}: symlink ${member} points outside ${top}/ (${JSON.stringify(target)})`);
  if (target === '' || target.startsWith('/') || target.includes('\\') || /^[A-Za-z]:/.test(target)) throw refuse();
  const resolved = segments.slice(0, -1);
  for (const part of target.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      resolved.pop();
      if (resolved.length === 0) throw refuse();
    } else {
      resolved.push(part);
    }
  }
  if (resolved[0] !== top) throw refuse();
}

async function drain(entry: TarEntry): Promise<void> {
  for await (const chunk of entry) void chunk;
}

async function readSmall(entry: TarEntry, size: number, what: string, where: string): Promise<Buffer> {
  if (size > MAX_METADATA_BYTES) throw badUpload(`${where}: ${what} is larger than ${MAX_METADATA_BYTES} bytes`);
  const chunks: Buffer[] = [];
  for await (const chunk of entry) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
