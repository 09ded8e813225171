/**
 * Tar and gzipped tar through tar-stream, in one forward pass. Entry bodies are always read to the
 * end (tar-stream tears the whole extraction down when one entry stream is destroyed), so a
 * visitor gets its own stream that it may abandon; whatever it leaves is discarded here.
 */
import { PassThrough, type Readable } from 'node:stream';
import { posix } from 'node:path';
import { createGunzip } from 'node:zlib';
import * as tar from 'tar-stream';
import type { Guard } from './limits.js';
import { formatOf, memberPath, unsafeReason } from './names.js';
import { chain } from './streams.js';
import { drainOrClose } from '../storage/drain.js';
import type { MemberInfo, MemberKind, Visit } from './types.js';

function kindOf(type: tar.Header['type']): MemberKind {
  switch (type) {
    case 'file':
    case 'contiguous-file':
      return 'file';
    case 'directory':
      return 'directory';
    case 'symlink':
      return 'symlink';
    case 'link':
      return 'hardlink';
    default:
      return 'other';
  }
}

/** True when a link at `path` pointing to `target` resolves outside the archive root. */
function linkEscapes(path: string, target: string): boolean {
  if (target.startsWith('/') || target.includes('\\')) return true;
  const resolved = posix.normalize(posix.join(posix.dirname(path), target));
  return resolved === '..' || resolved.startsWith('../');
}

export async function walkTar(input: Readable, gzip: boolean, guard: Guard, visit: Visit): Promise<void> {
  let bytes = input;
  if (gzip) {
    const counted = guard.counter();
    bytes = chain(input, counted.stream, guard.track(createGunzip()), guard.meter('the gzip stream', counted));
  }
  const extract = guard.track(tar.extract());
  bytes.on('error', (err) => extract.destroy(err));
  bytes.pipe(extract);
  try {
    for await (const entry of extract) {
      guard.entry();
      const header = entry.header;
      const path = memberPath(header.name);
      const kind = kindOf(header.type);
      const info: MemberInfo = { path, kind, size: kind === 'file' ? header.size : 0 };
      const nested = formatOf(path);
      if (kind === 'file' && nested !== null && nested !== 'download-only') info.nested = nested;
      const unsafe = unsafeReason(path);
      if (unsafe) info.unsafe = unsafe;
      if (kind === 'symlink' || kind === 'hardlink') {
        info.linkTarget = header.linkname;
        if (!unsafe && kind === 'symlink' && linkEscapes(path, header.linkname)) info.unsafe = 'link points outside the archive';
      }
      if (!(await visitEntry(entry, info, guard, visit))) break;
    }
  } finally {
    bytes.unpipe(extract);
    bytes.destroy();
  }
}

async function visitEntry(entry: AsyncIterable<unknown>, info: MemberInfo, guard: Guard, visit: Visit): Promise<boolean> {
  let body: PassThrough | null = null;
  let pump: Promise<void> | null = null;
  const start = (target: PassThrough | null) => (pump ??= pumpInto(entry, target));
  let more: boolean;
  try {
    more = await visit({
      info,
      open: async () => {
        if (body) throw new Error(`member ${info.path} opened twice`);
        body = guard.track(new PassThrough());
        body.on('error', () => undefined); // errors reach the reader; none may go unhandled
        start(body);
        return body;
      },
    });
  } catch (err) {
    (body as PassThrough | null)?.destroy();
    start(null).catch(() => undefined);
    throw err;
  }
  const opened = body as PassThrough | null;
  if (opened && !opened.writableEnded) opened.destroy();
  await start(null);
  if (opened) guard.untrack(opened);
  return more;
}

/** Copies an entry body into `target` (with backpressure) until the target goes away, then discards. */
async function pumpInto(entry: AsyncIterable<unknown>, target: PassThrough | null): Promise<void> {
  try {
    for await (const chunk of entry) {
      if (target && !target.destroyed && !target.write(chunk as Uint8Array)) await drainOrClose(target);
    }
    if (target && !target.destroyed) target.end();
  } catch (err) {
    target?.destroy(err as Error);
    throw err;
  }
}
