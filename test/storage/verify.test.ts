/**
 * The digest check on reads (`storage/verify.ts`): intact bytes pass unchanged; changed bytes
 * never arrive whole (the last chunk is held back and the stream errors instead); a failing
 * source fails the stream; a consumer that gives up releases the source. And the per-process
 * memory of verified versions, which spares re-hashing unchanged blobs.
 */
import { createHash } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { DigestMismatchError } from '../../registry/src/storage/types.js';
import { VerifiedVersions, verifying } from '../../registry/src/storage/verify.js';

const chunks = [Buffer.from('first chunk, '), Buffer.from('second chunk, '), Buffer.from('last chunk')];
const whole = Buffer.concat(chunks);
const digest = createHash('sha256').update(whole).digest('hex');

/** Everything the stream gave before it ended or failed, and how it finished (as a socket would see it). */
function drain(stream: Readable): Promise<{ bytes: Buffer; error: unknown }> {
  const got: Buffer[] = [];
  return new Promise((resolve) => {
    stream.on('data', (c: Buffer) => got.push(c));
    stream.on('end', () => resolve({ bytes: Buffer.concat(got), error: undefined }));
    stream.on('error', (error) => resolve({ bytes: Buffer.concat(got), error }));
  });
}

describe('verifying', () => {
  it('passes intact bytes through unchanged', async () => {
    expect(await drain(verifying(Readable.from(chunks), digest))).toEqual({ bytes: whole, error: undefined });
  });

  it('passes an empty blob', async () => {
    const empty = createHash('sha256').digest('hex');
    expect(await drain(verifying(Readable.from([]), empty))).toEqual({ bytes: Buffer.alloc(0), error: undefined });
  });

  it('errors with DigestMismatchError instead of delivering the last chunk of changed bytes', async () => {
    const changed = [chunks[0]!, Buffer.from('SECOND chunk, '), chunks[2]!];
    const { bytes, error } = await drain(verifying(Readable.from(changed), digest));
    expect(error).toBeInstanceOf(DigestMismatchError);
    expect((error as DigestMismatchError).expected).toBe(digest);
    expect(bytes.length).toBeLessThan(whole.length);
    expect(bytes.length).toBe(chunks[0]!.length + chunks[1]!.length);
  });

  it('fails when the source fails midway', async () => {
    const source = new PassThrough();
    const out = verifying(source, digest);
    const result = drain(out);
    source.write(chunks[0]);
    source.destroy(Object.assign(new Error('connection reset'), { code: 'ECONNRESET' }));
    const { error } = await result;
    expect((error as NodeJS.ErrnoException).code).toBe('ECONNRESET');
  });

  it('destroys the source when the consumer gives up', async () => {
    const source = new PassThrough();
    const out = verifying(source, digest);
    out.destroy();
    await new Promise((resolve) => source.once('close', resolve));
    expect(source.destroyed).toBe(true);
  });
});

describe('VerifiedVersions', () => {
  it('verifies a version on its first whole read, streams it unhashed after, and verifies again when the version changes', async () => {
    const versions = new VerifiedVersions();
    expect(await drain(versions.read(Readable.from(chunks), digest, 'v1'))).toEqual({ bytes: whole, error: undefined });
    expect(versions.has(digest, 'v1')).toBe(true);
    // v1 is known good: its bytes are no longer hashed (so this changed stream is not caught:
    // the cost of remembering, paid only by a change that keeps the version).
    const changed = [Buffer.from('changed')];
    expect((await drain(versions.read(Readable.from(changed), digest, 'v1'))).error).toBeUndefined();
    // Another version of the object is verified again.
    expect((await drain(versions.read(Readable.from(changed), digest, 'v2'))).error).toBeInstanceOf(DigestMismatchError);
    expect(versions.has(digest, 'v2')).toBe(false);
    // Without a version, every read is verified.
    expect((await drain(versions.read(Readable.from(changed), digest, undefined))).error).toBeInstanceOf(DigestMismatchError);
  });

  it('remembers a bounded number of blobs, the oldest forgotten first', () => {
    const versions = new VerifiedVersions(2);
    versions.add('a'.repeat(64), 'v');
    versions.add('b'.repeat(64), 'v');
    versions.add('c'.repeat(64), 'v');
    expect([versions.has('a'.repeat(64), 'v'), versions.has('b'.repeat(64), 'v'), versions.has('c'.repeat(64), 'v')]).toEqual([false, true, true]);
  });
});
