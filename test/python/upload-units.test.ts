/** The small parsers of the upload path, on inputs the end-to-end suites do not reach. */
import { describe, expect, it } from 'vitest';
import { parseCoreMetadata, parseHeaders } from '../../registry/src/python/model/core-metadata.js';
import { reasonPhraseOf } from '../../registry/src/python/handlers/upload/errors.js';
import { parseArtifactName } from '../../registry/src/python/model/filenames.js';
import { parseRecord } from '../../registry/src/python/handlers/upload/record.js';
import { HttpError } from '../../registry/src/http/errors.js';

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(HttpError);
    expect((err as HttpError).status).toBe(400);
    return (err as HttpError).message;
  }
  throw new Error('expected a refusal');
}

describe('artifact filenames', () => {
  it('parses wheels, with build tags and compressed tag sets', () => {
    expect(parseArtifactName('Foo_Bar-1.0_rc1-2b-py2.py3-none-any.whl')).toEqual({
      kind: 'wheel',
      filename: 'Foo_Bar-1.0_rc1-2b-py2.py3-none-any.whl',
      rawName: 'Foo_Bar',
      project: 'foo-bar',
      version: '1.0rc1',
      build: '2b',
      tags: ['py2-none-any', 'py3-none-any'],
    });
    expect(parseArtifactName('x-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl')).toMatchObject({
      tags: ['cp312-cp312-manylinux_2_17_x86_64', 'cp312-cp312-manylinux2014_x86_64'],
    });
  });

  it('refuses bad wheel names', () => {
    expect(refusal(() => parseArtifactName('foo-1.0-x-py3-none-any.whl'))).toMatch(/build tag "x" must start with a digit/);
    expect(refusal(() => parseArtifactName('foo-1.0-any.whl'))).toMatch(/invalid wheel filename/);
    expect(refusal(() => parseArtifactName('foo-one-py3-none-any.whl'))).toMatch(/not a PEP 440 version/);
  });

  it('holds sdists to PEP 625', () => {
    expect(parseArtifactName('foo_bar-1.0.post1.tar.gz')).toMatchObject({ kind: 'sdist', project: 'foo-bar', version: '1.0.post1' });
    expect(refusal(() => parseArtifactName('Foo_Bar-1.0.tar.gz'))).toMatch(/should be "foo_bar"/);
    expect(refusal(() => parseArtifactName('foo.bar-1.0.tar.gz'))).toMatch(/should be "foo_bar"/);
    expect(refusal(() => parseArtifactName('foo-bar-1.0.tar.gz'))).toMatch(/PEP 625/);
    expect(refusal(() => parseArtifactName('foo-1.0-1.tar.gz'))).toMatch(/PEP 625/);
    expect(refusal(() => parseArtifactName('foo-1.0.post.1.tar.gz'))).toMatch(/PEP 625|PEP 440/);
    expect(refusal(() => parseArtifactName('foo-1.0-post1.tar.gz'))).toMatch(/PEP 625/);
  });

  it('accepts only .whl and .tar.gz', () => {
    for (const name of ['foo-1.0.zip', 'foo-1.0.tar.bz2', 'foo-1.0-py3.11.egg', 'foo-1.0.tgz']) {
      expect(refusal(() => parseArtifactName(name))).toMatch(/only wheels \(\.whl\) and source distributions \(\.tar\.gz\) are accepted/);
    }
    expect(refusal(() => parseArtifactName('../foo-1.0.tar.gz'))).toMatch(/invalid filename/);
  });
});

describe('RECORD', () => {
  it('reads quoted paths, CRLF, and tolerates digest padding', () => {
    const record = parseRecord(Buffer.from('"a,b.py",sha256=AAAA==,3\r\npkg/x.py,sha256=BBBB,10\npkg-1.0.dist-info/RECORD,,\n'), 'RECORD');
    expect([...record.values()]).toEqual([
      { path: 'a,b.py', algorithm: 'sha256', digest: 'AAAA', size: 3 },
      { path: 'pkg/x.py', algorithm: 'sha256', digest: 'BBBB', size: 10 },
      { path: 'pkg-1.0.dist-info/RECORD' },
    ]);
  });

  it('refuses unsafe paths, duplicates and bad sizes', () => {
    expect(refusal(() => parseRecord(Buffer.from('../x,sha256=AA,1\n'), 'RECORD'))).toMatch(/unsafe path/);
    expect(refusal(() => parseRecord(Buffer.from('x,sha256=AA,1\nx,sha256=AA,1\n'), 'RECORD'))).toMatch(/lists x twice/);
    expect(refusal(() => parseRecord(Buffer.from('x,sha256=AA,-1\n'), 'RECORD'))).toMatch(/not a byte count/);
    expect(refusal(() => parseRecord(Buffer.from('"x,sha256=AA,1\n'), 'RECORD'))).toMatch(/unterminated/);
  });
});

describe('core metadata', () => {
  it('reads folded headers and stops at the body', () => {
    const headers = parseHeaders(Buffer.from('Name: a\nSummary: one\n  two\nLicense-File: A\nLicense-File: B\n\nName: not-a-header\n'), 'METADATA');
    expect(headers.get('name')).toEqual(['a']);
    expect(headers.get('summary')).toEqual(['one\ntwo']);
    expect(headers.get('license-file')).toEqual(['A', 'B']);
  });

  it('requires Metadata-Version, a valid Name and a PEP 440 Version', () => {
    expect(parseCoreMetadata(Buffer.from('Metadata-Version: 2.4\nName: Foo.Bar\nVersion: 1.0-RC1\nRequires-Python: >=3.9\n'), 'M')).toMatchObject({
      name: 'Foo.Bar',
      project: 'foo-bar',
      version: '1.0rc1',
      requiresPython: '>=3.9',
    });
    expect(refusal(() => parseCoreMetadata(Buffer.from('Name: a\nVersion: 1\n'), 'M'))).toMatch(/no Metadata-Version/);
    expect(refusal(() => parseCoreMetadata(Buffer.from('Metadata-Version: 2.1\nVersion: 1\n'), 'M'))).toMatch(/no Name/);
    expect(refusal(() => parseCoreMetadata(Buffer.from('Metadata-Version: 2.1\nName: -a\nVersion: 1\n'), 'M'))).toMatch(/not a valid project name/);
    expect(refusal(() => parseCoreMetadata(Buffer.from('Metadata-Version: 2.1\nName: a\nVersion: banana\n'), 'M'))).toMatch(/not a PEP 440 version/);
    expect(refusal(() => parseCoreMetadata(Buffer.from([0xff, 0xfe]), 'M'))).toMatch(/not valid UTF-8/);
  });
});

describe('reason phrases', () => {
  it('makes one bounded line of ASCII', () => {
    expect(reasonPhraseOf('two\nlines\tand “quotes”')).toBe('two lines and ?quotes?');
    expect(reasonPhraseOf('x'.repeat(1000))).toHaveLength(300);
  });
});
