/**
 * `archive/` through a real FsBlobStore (so zip reads go through ranged `get`s): every supported
 * format listed and previewed, nesting both ways, and the inputs that must be refused promptly.
 * Timeouts are vitest's: a hang fails the test, no timing is asserted.
 */
import { readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  formatOf,
  isProbablyText,
  listMembers,
  MAX_PREVIEW_BYTES,
  readMember,
  requireFormat,
  utf8SafeLength,
  type ArchiveFormat,
  type MemberInfo,
} from '../../registry/src/archive/index.js';
import { sliceWithHead } from '../../registry/src/archive/streams.js';
import { expectArchiveError, makeFixtures, type Fixtures } from './fixtures.js';

let fx: Fixtures;
beforeAll(async () => {
  fx = await makeFixtures();
}, 120_000);
afterAll(() => {
  if (fx) rmSync(fx.root, { recursive: true, force: true });
});

const QUICK = 15_000;

async function list(name: string, opts: Parameters<typeof listMembers>[2] = {}) {
  return listMembers(await fx.source(name), requireFormat(name), opts);
}
async function read(name: string, member: string, opts: Parameters<typeof readMember>[3] = {}) {
  return readMember(await fx.source(name), requireFormat(name), member, opts);
}
const byPath = (members: MemberInfo[]) => new Map(members.map((m) => [m.path, m]));
const utf8 = (b: Buffer) => b.toString('utf8');

describe('formats by name', () => {
  it('maps names to formats and says which are download-only', () => {
    const cases: [string, ArchiveFormat | 'download-only' | null][] = [
      ['demo-1.0-py3-none-any.whl', 'zip'],
      ['x.ZIP', 'zip'],
      ['demo-1.0-py3.11.egg', 'zip'],
      ['demo-1.0.tar', 'tar'],
      ['demo-1.0.tar.gz', 'tar.gz'],
      ['demo-1.0.tgz', 'tar.gz'],
      ['demo-1.0.tar.bz2', 'download-only'],
      ['demo-1.0.tar.xz', 'download-only'],
      ['demo-1.0.tar.zst', 'download-only'],
      ['demo-1.0.exe', null],
      ['notes.gz', null],
    ];
    for (const [name, format] of cases) expect([name, formatOf(name)]).toEqual([name, format]);
  });

  it('refuses download-only tars with a clear unsupported error', async () => {
    for (const name of ['demo-1.0.tar.xz', 'demo-1.0.tar.bz2']) {
      await expectArchiveError(Promise.resolve().then(() => requireFormat(name)), 'unsupported', /download-only/);
    }
    await expectArchiveError(Promise.resolve().then(() => requireFormat('setup.exe')), 'unsupported', /not an archive/);
  });
});

describe('listing and previewing each format', () => {
  it('lists and previews a wheel', { timeout: QUICK }, async () => {
    const { members, truncated, format } = await list('demo-1.0-py3-none-any.whl');
    expect(format).toBe('zip');
    expect(truncated).toBe(false);
    const m = byPath(members);
    expect(m.get('demo/__init__.py')).toMatchObject({ kind: 'file', size: 25 });
    expect(m.get('demo-1.0.dist-info/METADATA')?.compressedSize).toBeGreaterThan(0);
    const init = await read('demo-1.0-py3-none-any.whl', 'demo/__init__.py');
    expect(utf8(init.data)).toBe("print('hello from demo')\n");
    expect(init).toMatchObject({ size: 25, offset: 0, nextOffset: null });
    const bin = await read('demo-1.0-py3-none-any.whl', 'demo/data.bin');
    expect(bin.data.length).toBe(4096);
    expect(isProbablyText(bin.data)).toBe(false);
  });

  it('lists and previews a zip with directories and stored members', { timeout: QUICK }, async () => {
    const m = byPath((await list('plain.zip')).members);
    expect(m.get('docs')).toMatchObject({ kind: 'directory' });
    expect(m.get('stored.txt')).toMatchObject({ kind: 'file', size: 21, compressedSize: 21 });
    expect(utf8((await read('plain.zip', 'stored.txt')).data)).toBe('stored, not deflated\n');
    expect(utf8((await read('plain.zip', 'docs/a.md')).data)).toBe('# A\n');
    await expectArchiveError(read('plain.zip', 'docs'), 'not-a-file', /directory/);
  });

  it('lists and previews a zipped egg', { timeout: QUICK }, async () => {
    const { members } = await list('demo-1.0-py3.11.egg');
    expect(members.map((x) => x.path).sort()).toEqual(['EGG-INFO/PKG-INFO', 'demo/__init__.py']);
    expect(utf8((await read('demo-1.0-py3.11.egg', 'EGG-INFO/PKG-INFO')).data)).toContain('Name: demo');
  });

  for (const name of ['demo-1.0.tar', 'demo-1.0.tar.gz', 'demo-1.0.tgz']) {
    it(`lists and previews ${name}`, { timeout: QUICK }, async () => {
      const { members, format } = await list(name);
      expect(format).toBe(name.endsWith('.tar') ? 'tar' : 'tar.gz');
      const m = byPath(members);
      expect(m.get('demo-1.0')).toMatchObject({ kind: 'directory' });
      expect(m.get('demo-1.0/setup.py')).toMatchObject({ kind: 'file', size: 37 });
      expect(m.get('demo-1.0/link')).toMatchObject({ kind: 'symlink', linkTarget: 'setup.py' });
      expect(m.get('demo-1.0/link')?.unsafe).toBeUndefined();
      const long = `demo-1.0/${'long/'.repeat(30)}deep.txt`; // a pax path, listed without its "./"
      expect(m.get(long)).toMatchObject({ kind: 'file' });
      expect(utf8((await read(name, 'demo-1.0/setup.py')).data)).toBe('from setuptools import setup\nsetup()\n');
      expect(utf8((await read(name, `./${long}`)).data)).toBe('a long pax path\n');
      await expectArchiveError(read(name, 'demo-1.0/link'), 'unsafe', /link.*never followed/);
      await expectArchiveError(read(name, 'demo-1.0/missing.py'), 'not-found');
    });
  }

  it('lists an empty zip', { timeout: QUICK }, async () => {
    expect(await list('empty.zip')).toEqual({ format: 'zip', members: [], truncated: false });
  });
});

describe('nested archives', () => {
  it('marks members that are archives', { timeout: QUICK }, async () => {
    const m = byPath((await list('outer.zip')).members);
    expect(m.get('inner/demo-1.0.tar.gz')?.nested).toBe('tar.gz');
    expect(m.get('pkg.whl')?.nested).toBe('zip');
    expect(m.get('readme.txt')?.nested).toBeUndefined();
  });

  it('lists and reads a tar.gz inside a zip', { timeout: QUICK }, async () => {
    const inner = await list('outer.zip', { within: 'inner/demo-1.0.tar.gz!/' });
    expect(inner.format).toBe('tar.gz');
    expect(inner.members.map((x) => x.path)).toContain('demo-1.0/setup.py');
    const content = await read('outer.zip', 'inner/demo-1.0.tar.gz!/demo-1.0/PKG-INFO');
    expect(utf8(content.data)).toContain('Name: demo');
    expect(content.path).toBe('inner/demo-1.0.tar.gz!/demo-1.0/PKG-INFO');
  });

  it('lists and reads a wheel inside a zip', { timeout: QUICK }, async () => {
    const inner = await list('outer.zip', { within: 'pkg.whl' });
    expect(inner.members.map((x) => x.path)).toContain('demo/__init__.py');
    expect(utf8((await read('outer.zip', 'pkg.whl!/demo/__init__.py')).data)).toContain('hello from demo');
  });

  it('lists and reads a wheel inside a tar.gz, and a tar inside a tar.gz', { timeout: QUICK }, async () => {
    const whl = 'outer/wheels/demo-1.0-py3-none-any.whl';
    expect(byPath((await list('outer.tar.gz')).members).get(whl)?.nested).toBe('zip');
    const inner = await list('outer.tar.gz', { within: `${whl}!/` });
    expect(inner.format).toBe('zip');
    expect(inner.members).toHaveLength(5);
    expect(utf8((await read('outer.tar.gz', `${whl}!/demo-1.0.dist-info/METADATA`)).data)).toContain('Version: 1.0');
    expect(utf8((await read('outer.tar.gz', 'outer/inner.tar!/inner/notes.txt')).data)).toBe('inside a tar inside a tar.gz\n');
  });

  it('spills a nested zip larger than the in-memory bound to a temp file and removes it', { timeout: QUICK }, async () => {
    const before = readdirSync(tmpdir()).filter((f) => f.startsWith('velodex-archive-')).length;
    const content = await read('outer.zip', 'pkg.whl!/demo/__init__.py', { limits: { maxNestedInMemory: 100 } });
    expect(utf8(content.data)).toContain('hello from demo');
    expect(readdirSync(tmpdir()).filter((f) => f.startsWith('velodex-archive-')).length).toBe(before);
  });

  it('opens up to three levels of nesting and refuses a fourth', { timeout: QUICK }, async () => {
    expect(utf8((await read('deep.zip', 'l1.zip!/l2.zip!/l3.zip!/at3.txt')).data)).toBe('level 3\n');
    expect((await list('deep.zip', { within: 'l1.zip!/l2.zip!/l3.zip' })).members.map((x) => x.path).sort()).toEqual(['at3.txt', 'l4.zip']);
    await expectArchiveError(read('deep.zip', 'l1.zip!/l2.zip!/l3.zip!/l4.zip!/deepest.txt'), 'too-large', /nested 4 deep.*at most 3/);
    await expectArchiveError(list('deep.zip', { within: 'l1.zip!/l2.zip!/l3.zip!/l4.zip' }), 'too-large', /nested 4 deep/);
  });

  it('refuses to descend into a member that is not an archive, or a download-only one', { timeout: QUICK }, async () => {
    await expectArchiveError(read('outer.zip', 'readme.txt!/x'), 'unsupported', /not an archive/);
    await expectArchiveError(read('outer.zip', 'missing.zip!/x'), 'not-found', /missing\.zip/);
  });
});

describe('previews: offsets and limits', () => {
  const big = 'demo/big.txt';
  it('returns at most the preview size, with where the next page starts', { timeout: QUICK }, async () => {
    const first = await read('demo-1.0-py3-none-any.whl', big);
    expect(first.size).toBeGreaterThan(3 * 1024 * 1024);
    expect(first.data.length).toBe(MAX_PREVIEW_BYTES);
    expect(first.nextOffset).toBe(MAX_PREVIEW_BYTES);
    expect(isProbablyText(first.data, { partial: true })).toBe(true);

    const page = await read('demo-1.0-py3-none-any.whl', big, { offset: 1000, maxBytes: 50 });
    expect(page).toMatchObject({ offset: 1000, nextOffset: 1050 });
    expect(page.data.equals(first.data.subarray(1000, 1050))).toBe(true);

    const tail = await read('demo-1.0-py3-none-any.whl', big, { offset: first.size - 10 });
    expect(tail).toMatchObject({ nextOffset: null });
    expect(tail.data.length).toBe(10);

    const end = await read('demo-1.0-py3-none-any.whl', big, { offset: first.size });
    expect(end.data.length).toBe(0);
    await expectArchiveError(read('demo-1.0-py3-none-any.whl', big, { offset: first.size + 1 }), 'range', /past the end/);
    await expectArchiveError(read('demo-1.0-py3-none-any.whl', big, { offset: -1 }), 'range');
    const clamped = await read('demo-1.0-py3-none-any.whl', big, { maxBytes: 10 * MAX_PREVIEW_BYTES });
    expect(clamped.data.length).toBe(MAX_PREVIEW_BYTES);
  });

  it('pages through a tar member the same way', { timeout: QUICK }, async () => {
    const page = await read('demo-1.0.tar.gz', 'demo-1.0/setup.py', { offset: 5, maxBytes: 10 });
    expect(utf8(page.data)).toBe('setuptools');
    expect(page.nextOffset).toBe(15);
  });
});

describe('refusals', () => {
  it('previews the head of a zip bomb member without inflating it all', { timeout: QUICK }, async () => {
    const m = byPath((await list('bomb.zip')).members);
    expect(m.get('zeros.bin')?.size).toBe(200 * 1024 * 1024);
    const head = await read('bomb.zip', 'zeros.bin');
    expect(head.data.length).toBe(MAX_PREVIEW_BYTES);
    expect(head.nextOffset).toBe(MAX_PREVIEW_BYTES);
  });

  it('stops inflating at the compression-ratio guard', { timeout: QUICK }, async () => {
    await expectArchiveError(read('bomb.zip', 'zeros.bin', { offset: 150 * 1024 * 1024 }), 'too-large', /200:1.*bomb/);
    await expectArchiveError(list('bomb.zip', { within: 'inner.tar' }), 'too-large', /bomb/);
    await expectArchiveError(list('bomb.tar.gz'), 'too-large', /gzip stream expands more than 200:1/);
  });

  it('stops at the byte budget of one request', { timeout: QUICK }, async () => {
    const limits = { maxCompressionRatio: 1e9 };
    await expectArchiveError(read('bomb.zip', 'zeros.bin', { offset: 150 * 1024 * 1024, limits }), 'too-large', /more than 64 MiB/);
    await expectArchiveError(list('bomb.tar.gz', { limits }), 'too-large', /more than 64 MiB/);
  });

  it('refuses a nested archive whose declared size exceeds the budget before reading it', { timeout: QUICK }, async () => {
    const m = byPath((await list('huge-claim.zip')).members);
    expect(m.get('huge.zip')?.size).toBe(0xfffffff0);
    await expectArchiveError(list('huge-claim.zip', { within: 'huge.zip' }), 'too-large', /huge\.zip \(4294967280 bytes\)/);
    // A preview stops early, but a member whose bytes run out before its declared size is corrupt.
    await expectArchiveError(read('huge-claim.zip', 'huge.zip', { maxBytes: 1e9, limits: { maxPreviewBytes: 1e9 } }), 'corrupt', /declares/);
  });

  it('truncates a listing of 100k members and finds the last one', { timeout: 60_000 }, async () => {
    const listing = await list('many.zip');
    expect(listing.truncated).toBe(true);
    expect(listing.members).toHaveLength(10_000);
    const last = await read('many.zip', 'm/099999.txt');
    expect(last).toMatchObject({ size: 0, nextOffset: null });
    await expectArchiveError(read('many.zip', 'm/099999.txt', { limits: { maxEntriesScanned: 50_000 } }), 'too-large', /more than 50000 entries/);
  });

  it('truncates a tar listing the same way, and stops reading it', { timeout: QUICK }, async () => {
    const listing = await list('outer.tar.gz', { limits: { maxMembersListed: 2 } });
    expect(listing).toMatchObject({ truncated: true });
    expect(listing.members.map((x) => x.path)).toEqual(['outer', 'outer/wheels/demo-1.0-py3-none-any.whl']);
  });

  it('gives up at the time budget', { timeout: 30_000 }, async () => {
    await expectArchiveError(read('many.zip', 'm/099999.txt', { limits: { timeBudgetMs: 20 } }), 'timeout', /20 ms/);
  });

  it('does not hang on a source that never answers', { timeout: QUICK }, async () => {
    const stuck = { size: 1000, open: () => new Promise<never>(() => undefined) };
    await expectArchiveError(listMembers(stuck, 'zip', { limits: { timeBudgetMs: 100 } }), 'timeout');
    await expectArchiveError(listMembers(stuck, 'tar.gz', { limits: { timeBudgetMs: 100 } }), 'timeout');
  });

  for (const name of ['traversal.zip', 'traversal.tar']) {
    it(`lists unsafe names in ${name} flagged, and never opens them`, { timeout: QUICK }, async () => {
      const { members } = await list(name);
      const flagged = Object.fromEntries(members.filter((x) => x.unsafe).map((x) => [x.path, x.unsafe]));
      expect(flagged['../evil.txt']).toMatch(/parent-directory/);
      expect(flagged['/abs.txt']).toMatch(/absolute/);
      // A tar link's target is in its header and is checked; a zip link's target is member data, not read.
      if (name.endsWith('.tar')) expect(flagged['escape']).toMatch(/outside the archive/);
      if (name.endsWith('.zip')) {
        expect(flagged['a\\b.txt']).toMatch(/backslash/);
        expect(flagged['C:/win.txt']).toMatch(/absolute/);
        expect(byPath(members).get('escape')).toMatchObject({ kind: 'symlink' });
      } else {
        expect(flagged['abs-link']).toMatch(/outside/);
        expect(byPath(members).get('ok-link')).toMatchObject({ kind: 'symlink', linkTarget: 'ok.txt' });
        expect(byPath(members).get('hard')).toMatchObject({ kind: 'hardlink', linkTarget: 'ok.txt' });
        expect(byPath(members).get('fifo')).toMatchObject({ kind: 'other' });
        await expectArchiveError(read(name, 'ok-link'), 'unsafe', /symbolic link to "ok.txt"/);
        await expectArchiveError(read(name, 'hard'), 'unsafe', /hard link/);
        await expectArchiveError(read(name, 'fifo'), 'not-a-file');
      }
      expect(members.filter((x) => x.path === 'dup.txt').every((x) => x.duplicate)).toBe(true);
      await expectArchiveError(read(name, 'dup.txt'), 'unsafe', /more than once/);
      // firstMatch stops at the first copy instead of reading on to refuse the repeat.
      expect((await read(name, 'dup.txt', { firstMatch: true })).data.length).toBeGreaterThan(0);
      await expectArchiveError(read(name, 'escape'), 'unsafe', /link/);
      for (const bad of ['../evil.txt', '/abs.txt', 'a\\b.txt', 'C:/win.txt', 'a/../../x', 'x!/', '']) {
        await expectArchiveError(read(name, bad), 'unsafe', /refused/);
      }
      expect(utf8((await read(name, 'ok.txt')).data)).toMatch(/x|fine/);
    });
  }

  it('lists encrypted zip members but does not preview them', { timeout: QUICK }, async () => {
    const m = byPath((await list('encrypted.zip')).members);
    expect(m.get('secret.txt')).toMatchObject({ encrypted: true });
    expect(m.get('public.txt')?.encrypted).toBeUndefined();
    await expectArchiveError(read('encrypted.zip', 'secret.txt'), 'unsupported', /encrypted/);
    expect(utf8((await read('encrypted.zip', 'public.txt')).data)).toBe('public\n');
  });

  it('calls truncated and corrupt archives corrupt', { timeout: QUICK }, async () => {
    await expectArchiveError(list('truncated.zip'), 'corrupt', /corrupt or truncated/);
    await expectArchiveError(list('truncated.tar.gz'), 'corrupt', /unexpected end/i);
    await expectArchiveError(list('truncated.tar'), 'corrupt', /unexpected end/i);
    await expectArchiveError(list('garbage.zip'), 'corrupt');
    await expectArchiveError(list('garbage.tar.gz'), 'corrupt');
    await expectArchiveError(list('garbage.tar'), 'corrupt', /header/);
    await expectArchiveError(read('corrupt-member.zip', 'demo/big.txt', { offset: 2 * 1024 * 1024 }), 'corrupt');
    await expectArchiveError(read('truncated.tar.gz', 'demo-1.0/setup.py'), 'corrupt');
    // The wrong format for the bytes is corrupt too, not a crash.
    await expectArchiveError(listMembers(await fx.source('demo-1.0.tar.gz'), 'zip'), 'corrupt');
    await expectArchiveError(listMembers(await fx.source('demo-1.0-py3-none-any.whl'), 'tar.gz'), 'corrupt');
  });

  it('reports a blob that vanished as not found', { timeout: QUICK }, async () => {
    const source = await fx.source('plain.zip');
    const gone = { size: source.size, open: () => Promise.reject(new Error('unused')) };
    await fx.store.delete(fx.digest('plain.zip'));
    await expectArchiveError(listMembers(source, 'zip'), 'not-found', /no longer stored/);
    await expectArchiveError(listMembers(gone, 'zip'), 'corrupt');
  });
});

describe('text sniffing', () => {
  it('calls valid UTF-8 without NUL text', () => {
    expect(isProbablyText(Buffer.from('plain ascii\n'))).toBe(true);
    expect(isProbablyText(Buffer.from('héllo wörld ✓'))).toBe(true);
    expect(isProbablyText(Buffer.from([0x68, 0x00, 0x69]))).toBe(false);
    expect(isProbablyText(Buffer.from([0xff, 0xfe, 0x41]))).toBe(false);
  });

  it('tolerates a character cut at the end of a partial page only', () => {
    const cut = Buffer.from('abc ✓').subarray(0, 6); // ✓ is 3 bytes; keep 2
    expect(isProbablyText(cut)).toBe(false);
    expect(isProbablyText(cut, { partial: true })).toBe(true);
    expect(utf8SafeLength(cut)).toBe(4);
    expect(utf8SafeLength(Buffer.from('abc ✓'))).toBe(7);
    expect(utf8SafeLength(Buffer.from('é'))).toBe(2);
    expect(utf8SafeLength(Buffer.alloc(0))).toBe(0);
  });
});

describe('sniffing text while listing and reading', () => {
  it('says which files look like text only when asked', { timeout: QUICK }, async () => {
    for (const name of ['demo-1.0-py3-none-any.whl', 'demo-1.0.tar.gz']) {
      expect((await list(name)).members.some((x) => 'text' in x)).toBe(false);
    }
    const wheel = byPath((await list('demo-1.0-py3-none-any.whl', { sniffBytes: 512 })).members);
    expect(wheel.get('demo/__init__.py')?.text).toBe(true);
    expect(wheel.get('demo/data.bin')?.text).toBe(false);
    expect(wheel.get('demo/big.txt')?.text).toBe(true);
    const tar = byPath((await list('demo-1.0.tar.gz', { sniffBytes: 512 })).members);
    expect(tar.get('demo-1.0/setup.py')?.text).toBe(true);
    expect(tar.get('demo-1.0')?.text).toBeUndefined();
    expect(tar.get('demo-1.0/link')?.text).toBeUndefined();
    // Unsafe members are never opened, not even to sniff them.
    const unsafe = (await list('traversal.tar', { sniffBytes: 512 })).members.filter((x) => x.unsafe);
    expect(unsafe.length).toBeGreaterThan(0);
    expect(unsafe.every((x) => x.text === undefined)).toBe(true);
  });

  it('judges a member read at any offset by its first bytes', { timeout: QUICK }, async () => {
    const big = await read('demo-1.0-py3-none-any.whl', 'demo/big.txt', { sniffBytes: 512, offset: 100_000, maxBytes: 10 });
    expect(big).toMatchObject({ text: true, offset: 100_000, nextOffset: 100_010 });
    expect(big.data.length).toBe(10);
    const bin = await read('demo-1.0-py3-none-any.whl', 'demo/data.bin', { sniffBytes: 512, offset: 4096 });
    expect(bin).toMatchObject({ text: false, nextOffset: null });
    expect(bin.data.length).toBe(0);
    expect((await read('demo-1.0.tar', 'demo-1.0/setup.py')).text).toBeUndefined();
  });

  it('keeps the head and a window of one stream in a single pass', async () => {
    const bytes = Buffer.from('0123456789abcdefghij');
    const from = (n: number) => Readable.from([bytes.subarray(0, n), bytes.subarray(n)]);
    expect(await sliceWithHead(from(3), 12, 4, 5)).toEqual({ head: Buffer.from('01234'), data: Buffer.from('cdef') });
    expect(await sliceWithHead(from(7), 2, 3, 8)).toEqual({ head: Buffer.from('01234567'), data: Buffer.from('234') });
    expect(await sliceWithHead(from(7), 18, 10, 0)).toEqual({ head: Buffer.alloc(0), data: Buffer.from('ij') });
    expect(await sliceWithHead(from(7), 0, 0, 0)).toEqual({ head: Buffer.alloc(0), data: Buffer.alloc(0) });
  });
});
