/**
 * Listing and previewing archive members, nested archives included, within fixed bounds. Knows
 * nothing of any ecosystem: callers hand in an `ArchiveSource` and a format.
 *
 * Member paths use `!/` between nesting levels: `inner.tar.gz!/pkg/mod.py` is `pkg/mod.py` inside
 * the member `inner.tar.gz`. Finding a member walks the whole archive, so that a path that occurs
 * twice is refused (`unsafe`) instead of silently picking one copy.
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ArchiveError, asArchiveError } from './errors.js';
import { Guard, type ArchiveLimits } from './limits.js';
import { NESTING_SEPARATOR, requireFormat, splitMemberPath, type ArchiveFormat } from './names.js';
import { bufferSource, fileSource, type ArchiveSource } from './source.js';
import { collect, slice, sliceWithHead } from './streams.js';
import { walkTar } from './tar.js';
import { headLooksLikeText } from './text.js';
import type { MemberInfo, Visit, WalkEntry } from './types.js';
import { walkZip } from './zip.js';

export { ArchiveError, type ArchiveErrorKind } from './errors.js';
export * from './limits.js';
export { formatOf, NESTING_SEPARATOR, requireFormat, type ArchiveFormat } from './names.js';
export { blobSource, bufferSource, fileSource, type ArchiveSource } from './source.js';
export { isProbablyText, utf8SafeLength } from './text.js';
export type { MemberInfo, MemberKind } from './types.js';
export { ArchiveWalks, DEFAULT_LISTING_CACHE_BYTES, defaultWalkLimit, type ArchiveWalksOptions } from './walks.js';

export interface InspectOptions {
  /** Tighter (or, for callers that know better, looser) bounds than `DEFAULT_LIMITS`. */
  limits?: Partial<ArchiveLimits>;
  /** Where a large nested zip is spilled while it is read; default: the OS temp dir. */
  tmpDir?: string;
  /**
   * Read the first this-many bytes (at most `maxPreviewBytes`) of each file listed, or of the
   * member read, and say in `text` whether they look like text. Off by default.
   */
  sniffBytes?: number;
  /**
   * readMember: open the first member with the path and stop reading there, instead of reading
   * the whole archive to refuse a path that occurs twice. For large streamed archives whose
   * format allows repeated paths (a tar stream may append a newer copy), where one page of a
   * preview must not cost a pass over the whole archive.
   */
  firstMatch?: boolean;
}

export interface Listing {
  /** The format of the archive listed (the nested one when `within` was given). */
  format: ArchiveFormat;
  members: MemberInfo[];
  /** More members exist than `maxMembersListed`. */
  truncated: boolean;
}

export interface MemberContent {
  path: string;
  /** The member's full size. */
  size: number;
  /** Where `data` starts within the member. */
  offset: number;
  data: Buffer;
  /** Where the next page starts, or null when `data` reaches the end of the member. */
  nextOffset: number | null;
  /** Only with `sniffBytes`: whether the member's first bytes look like text (whatever `offset` is). */
  text?: boolean;
}

/**
 * Lists an archive's members, or with `within` (a member path such as `a.whl!/b.tar.gz`, a
 * trailing `!/` allowed) the members of an archive nested in it.
 */
export async function listMembers(source: ArchiveSource, format: ArchiveFormat, opts: InspectOptions & { within?: string } = {}): Promise<Listing> {
  const guard = new Guard(opts.limits);
  const within = opts.within?.endsWith(NESTING_SEPARATOR) ? opts.within.slice(0, -NESTING_SEPARATOR.length) : opts.within;
  const levels = within ? splitMemberPath(within) : [];
  checkDepth(levels.length, guard);
  const sniff = sniffLength(opts, guard);
  return run(guard, () =>
    descend({ source }, format, levels, guard, opts, async (walk, innerFormat) => {
      const members: MemberInfo[] = [];
      const seen = new Map<string, MemberInfo>();
      let truncated = false;
      await walk(async (entry) => {
        const { info } = entry;
        if (members.length >= guard.limits.maxMembersListed) {
          truncated = true;
          return false;
        }
        // Unsafe and encrypted members are never opened, so they get no verdict.
        if (sniff > 0 && info.kind === 'file' && !info.unsafe && !info.encrypted) {
          info.text = headLooksLikeText(await slice(await entry.open(), 0, sniff), info.size);
        }
        const first = seen.get(info.path);
        if (first) {
          first.duplicate = true;
          info.duplicate = true;
        } else {
          seen.set(info.path, info);
        }
        members.push(info);
        return true;
      });
      return { format: innerFormat, members, truncated };
    }),
  );
}

/**
 * Returns up to `maxBytes` (at most `maxPreviewBytes`) of one member from `offset` on. The member
 * path may cross nesting levels with `!/`.
 */
export async function readMember(
  source: ArchiveSource,
  format: ArchiveFormat,
  path: string,
  opts: InspectOptions & { offset?: number; maxBytes?: number } = {},
): Promise<MemberContent> {
  const guard = new Guard(opts.limits);
  const levels = splitMemberPath(path);
  const target = levels.pop() as string;
  checkDepth(levels.length, guard);
  const offset = opts.offset ?? 0;
  if (!Number.isSafeInteger(offset) || offset < 0) throw new ArchiveError('range', `offset ${offset} is not a non-negative integer`);
  const max = Math.min(opts.maxBytes ?? guard.limits.maxPreviewBytes, guard.limits.maxPreviewBytes);
  const sniff = sniffLength(opts, guard);
  return run(guard, () =>
    descend({ source }, format, levels, guard, opts, (walk) =>
      findOne(walk, target, opts.firstMatch ?? false, async (entry) => {
        const { size } = entry.info;
        if (offset > size) throw new ArchiveError('range', `offset ${offset} is past the end of ${path} (${size} bytes)`);
        const take = offset < size ? max : 0;
        const empty = Buffer.alloc(0);
        const { head, data } = take > 0 || sniff > 0 ? await sliceWithHead(await entry.open(), offset, take, sniff) : { head: empty, data: empty };
        const end = offset + data.length;
        const content: MemberContent = { path, size, offset, data, nextOffset: end < size ? end : null };
        if (sniff > 0) content.text = headLooksLikeText(head, size);
        return content;
      }),
    ),
  );
}

type Container = { source: ArchiveSource } | { stream: Readable; size: number; name: string };
type Walk = (visit: Visit) => Promise<void>;

function sniffLength(opts: InspectOptions, guard: Guard): number {
  return Math.max(0, Math.min(opts.sniffBytes ?? 0, guard.limits.maxPreviewBytes));
}

function checkDepth(nested: number, guard: Guard): void {
  if (nested > guard.limits.maxNestingDepth) {
    throw new ArchiveError('too-large', `archives nested ${nested} deep; at most ${guard.limits.maxNestingDepth} levels of nesting are opened`);
  }
}

/** Opens `container` as `format`, follows `levels` into nested archives, and runs `action` there. */
async function descend<T>(
  container: Container,
  format: ArchiveFormat,
  levels: string[],
  guard: Guard,
  opts: InspectOptions,
  action: (walk: Walk, format: ArchiveFormat) => Promise<T>,
): Promise<T> {
  const walk = await walker(container, format, guard, opts);
  const [next, ...rest] = levels;
  if (next === undefined) return action(walk, format);
  const nestedFormat = requireFormat(next);
  return findOne(walk, next, opts.firstMatch ?? false, async (entry) =>
    descend({ stream: await entry.open(), size: entry.info.size, name: next }, nestedFormat, rest, guard, opts, action),
  );
}

async function walker(container: Container, format: ArchiveFormat, guard: Guard, opts: InspectOptions): Promise<Walk> {
  if (format === 'zip') {
    const source = 'source' in container ? container.source : await spool(container, guard, opts);
    return (visit) => walkZip(source, guard, visit);
  }
  return async (visit) => {
    const input = 'source' in container ? guard.track(await container.source.open()) : container.stream;
    await walkTar(input, format === 'tar.gz', guard, visit);
  };
}

/**
 * Walks the archive for the member at `path`, refusing links and non-files, and runs `use` on it
 * while it is open. Unless `firstMatch`, the walk goes on to the end and refuses a path that occurs
 * more than once.
 */
async function findOne<T>(walk: Walk, path: string, firstMatch: boolean, use: (entry: WalkEntry) => Promise<T>): Promise<T> {
  let found: { result: T } | null = null;
  await walk(async (entry) => {
    const { info } = entry;
    if (info.path !== path) return true;
    if (found) throw new ArchiveError('unsafe', `${path} occurs more than once in the archive; duplicate members are listed but not opened`);
    if (info.kind === 'symlink' || info.kind === 'hardlink') {
      const to = info.linkTarget === undefined ? '' : ` to ${JSON.stringify(info.linkTarget)}`;
      throw new ArchiveError('unsafe', `${path} is a ${info.kind === 'symlink' ? 'symbolic' : 'hard'} link${to}; links are listed, never followed`);
    }
    if (info.kind !== 'file') throw new ArchiveError('not-a-file', `${path} is a ${info.kind === 'directory' ? 'directory' : 'special file'}, not a file`);
    found = { result: await use(entry) };
    return !firstMatch;
  });
  if (!found) throw new ArchiveError('not-found', `no member ${path} in the archive`);
  return (found as { result: T }).result;
}

/** A nested zip needs random access: it is read into memory when small, else into a temp file. */
async function spool(container: { stream: Readable; size: number; name: string }, guard: Guard, opts: InspectOptions): Promise<ArchiveSource> {
  const { stream, size, name } = container;
  if (size > guard.remainingBytes()) {
    stream.destroy();
    throw new ArchiveError('too-large', `nested archive ${name} (${size} bytes) is larger than what is left of the ${guard.limits.maxBytesPerRequest}-byte budget of one request`);
  }
  if (size <= guard.limits.maxNestedInMemory) return bufferSource(await collect(stream, size, `nested archive ${name}`));
  const dir = await mkdtemp(join(opts.tmpDir ?? tmpdir(), 'velodex-archive-'));
  guard.onCleanup(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'nested.zip');
  await pipeline(stream, createWriteStream(file, { flags: 'wx' }));
  return fileSource(file, (await stat(file)).size);
}

async function run<T>(guard: Guard, work: () => Promise<T>): Promise<T> {
  try {
    return await guard.run(work);
  } catch (err) {
    // Our own I/O failing (disk full, permissions) is not the archive's fault: let it be a 500.
    if (!(err instanceof ArchiveError) && err instanceof Error && 'syscall' in err) throw err;
    if (!(err instanceof ArchiveError) && err instanceof Error && /encrypt/i.test(err.message)) {
      throw new ArchiveError('unsupported', `the archive uses encryption that cannot be read: ${err.message}`);
    }
    throw asArchiveError(err, 'the archive');
  }
}
