/**
 * Validates a staged wheel before anything becomes visible: the zip is read through its central
 * directory with bounded memory (yauzl reads ranges of the stage and streams each member), every member is hashed against RECORD,
 * and the `.dist-info` directory, WHEEL and METADATA must agree with the filename.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import yauzl, { type Entry, type ZipFile } from 'yauzl';
import { checkAgainstFilename, first, parseCoreMetadata, parseHeaders, type CoreMetadata } from '../../model/core-metadata.js';
import { badUpload } from './errors.js';
import type { WheelName } from '../../model/filenames.js';
import { MAX_MEMBERS, MAX_METADATA_BYTES, MAX_RECORD_BYTES, maxExpandedBytes } from './limits.js';
import { unsafeMemberReason } from '../../../http/member-path.js';
import { parseRecord, RECORD_ALGORITHMS } from './record.js';
import type { BlobStage } from '../../../storage/types.js';

export interface ValidatedArchive {
  meta: CoreMetadata;
  /** The core metadata bytes as stored in the archive (served as the `.metadata` sibling). */
  metadata: Buffer;
}

/** yauzl's random access, through the stage's ranged reads (yauzl's `end` is exclusive). */
class StageReader extends yauzl.RandomAccessReader {
  constructor(private readonly stage: BlobStage) {
    super();
  }

  override _readStreamForRange(start: number, end: number): Readable {
    return this.stage.readBack({ start, end: end - 1 });
  }
}

export async function validateWheel(stage: BlobStage, name: WheelName): Promise<ValidatedArchive> {
  const size = stage.size;
  let zip: ZipFile;
  try {
    zip = await yauzl.fromRandomAccessReaderPromise(new StageReader(stage), size, {
      lazyEntries: true,
      autoClose: false,
      decodeStrings: true,
      validateEntrySizes: true,
      // Keep backslashes as they are (and refuse them) instead of silently turning them into `/`.
      strictFileNames: true,
    });
  } catch (err) {
    throw badUpload(`${name.filename} is not a valid zip archive: ${messageOf(err)}`);
  }
  try {
    return await checkZip(zip, size, name);
  } finally {
    zip.close();
  }
}

async function checkZip(zip: ZipFile, size: number, name: WheelName): Promise<ValidatedArchive> {
  const where = name.filename;
  if (zip.entryCount > MAX_MEMBERS) throw badUpload(`${where} has ${zip.entryCount} members; at most ${MAX_MEMBERS} are accepted`);
  const files = await listFiles(zip, size, where);

  // Exactly one `.dist-info` directory, named from the normalised name and version.
  const stem = `${name.project.replace(/-/g, '_')}-${name.version}`;
  const distInfoDirs = new Set<string>();
  const dataDirs = new Set<string>();
  for (const member of files.keys()) {
    const top = member.split('/')[0] ?? '';
    if (member.includes('/') && top.endsWith('.dist-info')) distInfoDirs.add(top);
    if (member.includes('/') && top.endsWith('.data')) dataDirs.add(top);
  }
  if (distInfoDirs.size === 0) throw badUpload(`${where} has no .dist-info directory (expected ${stem}.dist-info/)`);
  if (distInfoDirs.size > 1) throw badUpload(`${where} has more than one .dist-info directory: ${[...distInfoDirs].sort().join(', ')}`);
  const distInfo = [...distInfoDirs][0] ?? '';
  if (!isNormalizedDir(distInfo, '.dist-info', name)) {
    throw badUpload(`${where}: the .dist-info directory must be named ${stem}.dist-info (normalized name and version), found ${distInfo}`);
  }
  for (const data of dataDirs) {
    if (!isNormalizedDir(data, '.data', name)) throw badUpload(`${where}: the .data directory must be named ${stem}.data, found ${data}`);
  }

  const required = (file: string): Entry => {
    const entry = files.get(`${distInfo}/${file}`);
    if (!entry) throw badUpload(`${where} has no ${distInfo}/${file}`);
    return entry;
  };
  const metadataEntry = required('METADATA');
  const wheelEntry = required('WHEEL');
  const recordEntry = required('RECORD');

  const wheelBytes = await readSmall(zip, wheelEntry, MAX_METADATA_BYTES, where);
  checkWheelFile(wheelBytes, name, `${distInfo}/WHEEL`);
  const metadata = await readSmall(zip, metadataEntry, MAX_METADATA_BYTES, where);
  const meta = parseCoreMetadata(metadata, `${distInfo}/METADATA`);
  checkAgainstFilename(meta, name, `${distInfo}/METADATA`);

  const record = parseRecord(await readSmall(zip, recordEntry, MAX_RECORD_BYTES, where), `${distInfo}/RECORD`);
  const unlisted = new Set([`${distInfo}/RECORD`, `${distInfo}/RECORD.jws`, `${distInfo}/RECORD.p7s`]);
  for (const [member, entry] of files) {
    if (unlisted.has(member)) continue;
    const row = record.get(member);
    if (!row) throw badUpload(`${where}: ${member} is not listed in ${distInfo}/RECORD`);
    if (!row.algorithm || row.digest === undefined) throw badUpload(`${where}: ${distInfo}/RECORD has no hash for ${member}`);
    if (!RECORD_ALGORITHMS.has(row.algorithm)) {
      throw badUpload(`${where}: ${distInfo}/RECORD uses ${row.algorithm} for ${member}; wheels must use sha256 or stronger`);
    }
    const actual = await digestMember(zip, entry, row.algorithm, where);
    if (actual.digest !== row.digest) {
      throw badUpload(`${where}: ${member} does not match its ${row.algorithm} hash in ${distInfo}/RECORD (RECORD says ${row.digest}, the file hashes to ${actual.digest})`);
    }
    if (row.size !== undefined && row.size !== actual.size) {
      throw badUpload(`${where}: ${member} is ${actual.size} bytes but ${distInfo}/RECORD says ${row.size}`);
    }
  }
  for (const path of record.keys()) {
    if (!files.has(path) && !unlisted.has(path)) throw badUpload(`${where}: ${distInfo}/RECORD lists ${path}, which is not in the wheel`);
  }
  return { meta, metadata };
}

/** The file members (not directories) by name, from the central directory, checked for safety. */
async function listFiles(zip: ZipFile, archiveSize: number, where: string): Promise<Map<string, Entry>> {
  const files = new Map<string, Entry>();
  const seenDirs = new Set<string>();
  const budget = maxExpandedBytes(archiveSize);
  let expanded = 0;
  await new Promise<void>((resolve, reject) => {
    const fail = (err: unknown) => {
      zip.removeAllListeners('entry');
      reject(err);
    };
    zip.on('error', (err: unknown) => fail(badUpload(describeZipError(err, where))));
    zip.on('end', () => resolve());
    zip.on('entry', (entry: Entry) => {
      const member = entry.fileName;
      const unsafe = unsafeMemberReason(member);
      if (unsafe) return fail(badUpload(`${where} has an unsafe member ${JSON.stringify(member)} (${unsafe})`));
      if (entry.isEncrypted()) return fail(badUpload(`${where}: member ${member} is encrypted`));
      if (member.endsWith('/')) {
        seenDirs.add(member);
      } else {
        if (files.has(member)) return fail(badUpload(`${where} has the member ${member} twice`));
        files.set(member, entry);
      }
      expanded += entry.uncompressedSize;
      if (expanded > budget) return fail(badUpload(`${where} expands to more than ${budget} bytes; refused as a possible zip bomb`));
      zip.readEntry();
    });
    zip.readEntry();
  });
  for (const dir of seenDirs) {
    if (files.has(dir.slice(0, -1))) throw badUpload(`${where} has ${dir.slice(0, -1)} both as a file and a directory`);
  }
  return files;
}

/** `{name}-{version}{suffix}` with the name normalised (underscores; case is not significant) and the version normalised. */
function isNormalizedDir(dir: string, suffix: string, name: WheelName): boolean {
  const parts = dir.slice(0, -suffix.length).split('-');
  if (parts.length !== 2) return false;
  const [dirName = '', dirVersion = ''] = parts;
  return /^[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*$/.test(dirName) && dirName.replace(/_/g, '-').toLowerCase() === name.project && dirVersion === name.version;
}

/** WHEEL must be a version 1.x file whose Tag lines are the filename's tags and Build its build tag. */
function checkWheelFile(bytes: Buffer, name: WheelName, where: string): void {
  const headers = parseHeaders(bytes, where);
  const wv = first(headers, 'Wheel-Version');
  if (wv === undefined) throw badUpload(`${where} has no Wheel-Version`);
  if (!/^1\.\d+$/.test(wv)) throw badUpload(`${where}: Wheel-Version ${JSON.stringify(wv)} is not supported (1.x is)`);
  const tags = new Set(headers.get('tag') ?? []);
  const expected = new Set(name.tags);
  const missing = [...expected].filter((t) => !tags.has(t));
  const extra = [...tags].filter((t) => !expected.has(t));
  if (missing.length > 0 || extra.length > 0) {
    const diff = [missing.length > 0 ? `missing Tag ${missing.join(', ')}` : '', extra.length > 0 ? `extra Tag ${extra.join(', ')}` : '']
      .filter(Boolean)
      .join('; ');
    throw badUpload(`${where} does not match the tags of ${name.filename}: ${diff}`);
  }
  const build = first(headers, 'Build');
  if (build !== name.build) {
    throw badUpload(
      name.build === undefined
        ? `${where} says Build: ${build ?? ''}, but ${name.filename} has no build tag`
        : `${where} says ${build === undefined ? 'no Build' : `Build: ${build}`}, but ${name.filename} has build tag ${name.build}`,
    );
  }
}

async function openMember(zip: ZipFile, entry: Entry, where: string): Promise<Readable> {
  try {
    return await zip.openReadStreamPromise(entry);
  } catch (err) {
    throw badUpload(`${where}: cannot read member ${entry.fileName}: ${messageOf(err)}`);
  }
}

async function readSmall(zip: ZipFile, entry: Entry, max: number, where: string): Promise<Buffer> {
  if (entry.uncompressedSize > max) throw badUpload(`${where}: ${entry.fileName} is larger than ${max} bytes`);
  const stream = await openMember(zip, entry, where);
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of stream) chunks.push(chunk as Buffer);
  } catch (err) {
    throw badUpload(`${where}: member ${entry.fileName} is corrupt: ${messageOf(err)}`);
  }
  return Buffer.concat(chunks);
}

async function digestMember(zip: ZipFile, entry: Entry, algorithm: string, where: string): Promise<{ digest: string; size: number }> {
  const stream = await openMember(zip, entry, where);
  const hash = createHash(algorithm);
  let size = 0;
  try {
    for await (const chunk of stream) {
      hash.update(chunk as Buffer);
      size += (chunk as Buffer).length;
    }
  } catch (err) {
    throw badUpload(`${where}: member ${entry.fileName} is corrupt: ${messageOf(err)}`);
  }
  return { digest: hash.digest('base64url'), size };
}

/** yauzl's own name checks fire before ours for some names; say the same thing ours would. */
function describeZipError(err: unknown, where: string): string {
  const message = messageOf(err);
  if (/^(invalid characters in fileName|absolute path|invalid relative path)/.test(message)) {
    return `${where} has an unsafe member name: ${message}`;
  }
  return `${where} is not a valid zip archive: ${message}`;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
