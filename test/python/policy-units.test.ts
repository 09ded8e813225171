/** Policy rule evaluation (src/policy/): globs, durations, combined policies, denial objects. */
import { describe, expect, it } from 'vitest';
import { buildConfig } from '../../registry/src/config/load.js';
import type { PolicyConfig } from '../../registry/src/config/types.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { formatDuration, parseDuration } from '../../registry/src/config/duration.js';
import { compileGlob } from '../../registry/src/policy/glob.js';
import { Policy } from '../../registry/src/policy/rules.js';
import { normalizeName } from '../../registry/src/python/model/records.js';

const cfg = (c: Partial<PolicyConfig>): PolicyConfig => ({ denyProjects: [], allowProjects: [], ...c });

describe('globs', () => {
  it('knows * and ? and nothing else', () => {
    expect(compileGlob('evil-*').test('evil-thing')).toBe(true);
    expect(compileGlob('evil-*').test('not-evil-thing')).toBe(false);
    expect(compileGlob('a?c').test('abc')).toBe(true);
    expect(compileGlob('a?c').test('abbc')).toBe(false);
    expect(compileGlob('a.c').test('abc')).toBe(false);
    expect(compileGlob('[ab]').test('a')).toBe(false);
    expect(compileGlob('*').test('')).toBe(true);
    // A glob written to make a backtracking matcher stall (a regular expression took minutes on
    // it) answers within the test's timeout.
    const hostile = `${'*a'.repeat(99)}*b`;
    expect(compileGlob(hostile).test('a'.repeat(128))).toBe(false);
    expect(compileGlob(hostile).test(`${'a'.repeat(127)}b`)).toBe(true);
  });
});

describe('durations', () => {
  it('reads seconds and unit strings', () => {
    expect(parseDuration(90)).toBe(90);
    expect(parseDuration('7d')).toBe(7 * 86_400);
    expect(parseDuration('1d12h')).toBe(36 * 3600);
    expect(parseDuration('2w')).toBe(14 * 86_400);
    expect(parseDuration('3600')).toBe(3600);
    expect(parseDuration('7 days')).toBeNull();
    expect(parseDuration(-1)).toBeNull();
    expect(formatDuration(93_784)).toBe('1d2h3m4s');
  });
});

describe('Policy', () => {
  it('matches deny and allow globs on normalized names, patterns included', () => {
    const p = new Policy([cfg({ denyProjects: ['Evil_*'], allowProjects: ['good-*', 'evil-*'] })], normalizeName);
    expect(p.projectDenial('serve', 'evil-thing')).toMatchObject({ action: 'serve', project: 'evil-thing', rule: 'deny-projects', field: 'name' });
    expect(p.projectDenial('upload', 'other')).toMatchObject({ action: 'upload', rule: 'allow-projects', field: 'name' });
    expect(p.projectDenial('serve', 'good-one')).toBeNull();
  });

  it('combines policies into the strictest: every allow list must match', () => {
    const p = new Policy([cfg({ allowProjects: ['a*'], maxFileSize: 100, minReleaseAgeSecs: 10 }), cfg({ allowProjects: ['*b'], maxFileSize: 50, minReleaseAgeSecs: 60 })]);
    expect(p.allowsProject('ab')).toBe(true);
    expect(p.allowsProject('a')).toBe(false);
    expect(p.maxFileSize).toBe(50);
    expect(p.minReleaseAgeSecs).toBe(60);
    expect(new Policy([]).empty).toBe(true);
  });

  it('denies files by size for every action and by age only when serving', () => {
    const now = Date.parse('2025-01-08T00:00:00Z');
    const p = new Policy([cfg({ maxFileSize: 1000, minReleaseAgeSecs: 7 * 86_400 })]);
    const old = { filename: 'x-1.0.tar.gz', version: '1.0', size: 10, uploadTime: '2025-01-01T00:00:00.000000Z' };
    const fresh = { ...old, uploadTime: '2025-01-07T00:00:00.000000Z' };
    expect(p.fileDenial('serve', 'x', old, now)).toBeNull();
    expect(p.fileDenial('serve', 'x', fresh, now)).toEqual({
      action: 'serve',
      project: 'x',
      filename: 'x-1.0.tar.gz',
      version: '1.0',
      rule: 'min-release-age',
      field: 'upload-time',
      reason: 'x-1.0.tar.gz was uploaded 1d ago; this index serves files only once they are 7d old (min-release-age)',
    });
    expect(p.fileDenial('upload', 'x', fresh, now)).toBeNull();
    // An unknown upload time cannot prove the file is old enough; an unknown size cannot be judged.
    expect(p.fileDenial('serve', 'x', { ...old, uploadTime: null }, now)?.rule).toBe('min-release-age');
    expect(p.fileDenial('serve', 'x', { ...old, size: null }, now)).toBeNull();
    expect(p.fileDenial('mirror', 'x', { ...old, size: 1001 }, now)).toMatchObject({ action: 'mirror', rule: 'max-file-size', field: 'size' });
  });

  it('gives a true min-release-age reason for a future, a missing and an unreadable upload time', () => {
    const now = Date.parse('2025-01-08T00:00:00Z');
    const p = new Policy([cfg({ minReleaseAgeSecs: 3600 })]);
    const file = { filename: 'x-1.0.tar.gz', version: '1.0', size: 10 };
    const reason = (uploadTime: string | null) => p.fileDenial('serve', 'x', { ...file, uploadTime }, now)?.reason;
    expect(reason('2025-01-08T02:00:00.000000Z')).toBe(
      "x-1.0.tar.gz has an upload time in the future (2025-01-08T02:00:00.000000Z, 2h ahead of this server's clock); this index serves files only once they are 1h old (min-release-age)",
    );
    expect(reason(null)).toMatch(/^x-1\.0\.tar\.gz has no known upload time; /);
    expect(reason('yesterday')).toMatch(/^x-1\.0\.tar\.gz has an unreadable upload time \(yesterday\); /);
    expect(reason('2025-01-07T23:59:59.500000Z')).toMatch(/^x-1\.0\.tar\.gz was uploaded 0s ago; /);
  });
});

describe('config', () => {
  const build = (policy: Record<string, unknown>) =>
    buildConfig({ index: [{ name: 'h', route: 'root/h', hosted: true, policy }] }, 'test', { ecosystems, env: {} });

  it('reads min-release-age as seconds or a duration', () => {
    expect(build({ 'min-release-age': '7d' }).indexes[0]?.policy.minReleaseAgeSecs).toBe(604_800);
    expect(build({ 'min-release-age': 3600 }).indexes[0]?.policy.minReleaseAgeSecs).toBe(3600);
    expect(build({}).indexes[0]?.policy.minReleaseAgeSecs).toBeUndefined();
  });

  it('names the key of a bad duration', () => {
    expect(() => build({ 'min-release-age': 'a week' })).toThrow(/min-release-age.*duration like "7d"/s);
  });
});
