/**
 * The retention keys of the config: `untagged_after` and `keep_tags` on a hosted OCI index, and
 * `[retention] every`. Every refusal names the index and the key: a bad duration, `newest = 0`,
 * and retention on an index that is not hosted OCI (a Python index, a cached or virtual one).
 */
import { describe, expect, it } from 'vitest';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { ConfigError } from '../../registry/src/config/errors.js';
import { buildConfig } from '../../registry/src/config/load.js';
import type { HostedIndex } from '../../registry/src/config/types.js';

const load = (raw: unknown) => buildConfig(raw, 'test', { ecosystems, env: {} });

function refusal(raw: unknown): ConfigError {
  try {
    load(raw);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('the config was accepted');
}

const ociHosted = (more: object) => ({ index: [{ name: 'images', route: 'root/images', ecosystem: 'oci', hosted: true, ...more }] });

describe('retention in the config', () => {
  it('reads untagged_after as seconds or a duration, keep_tags as rules, and [retention] every', () => {
    const config = load({ ...ociHosted({ untagged_after: '14d', keep_tags: [{ match: 'v*', newest: 5 }, { match: 'nightly-*', newest: 1 }] }), retention: { every: '6h' } });
    expect((config.indexes[0] as HostedIndex).retention).toEqual({ untaggedAfterSecs: 14 * 86_400, keepTags: [{ match: 'v*', newest: 5 }, { match: 'nightly-*', newest: 1 }] });
    expect(config.retention).toEqual({ everySecs: 6 * 3600 });
    expect((load(ociHosted({ untagged_after: 90 })).indexes[0] as HostedIndex).retention).toEqual({ untaggedAfterSecs: 90, keepTags: [] });
    expect((load(ociHosted({})).indexes[0] as HostedIndex).retention).toBeUndefined();
    expect(load(ociHosted({})).retention).toEqual({});
  });

  it.each([
    ['a week', /index "images" \(index\[0\]\)\.untagged_after: must be seconds or a duration like "7d"/],
    ['0s', /index "images" \(index\[0\]\)\.untagged_after: must be a duration of at least 1s/],
    [0, /index "images" \(index\[0\]\)\.untagged_after: must be a duration of at least 1s/],
    [-5, /index "images" \(index\[0\]\)\.untagged_after/],
  ])('refuses untagged_after = %j, naming the index and key', (value, message) => {
    const err = refusal(ociHosted({ untagged_after: value }));
    expect(err.message).toMatch(message);
    expect(err.index).toBe('images');
  });

  it.each([
    [{ match: 'v*', newest: 0 }, /index "images" \(index\[0\]\)\.keep_tags\.0\.newest: must be a positive integer/],
    [{ match: 'v*', newest: 1.5 }, /index "images" \(index\[0\]\)\.keep_tags\.0\.newest: must be a positive integer/],
    [{ match: '', newest: 2 }, /index "images" \(index\[0\]\)\.keep_tags\.0\.match: must be a non-empty glob/],
    [{ match: 'v*' }, /index "images" \(index\[0\]\)\.keep_tags\.0\.newest/],
    [{ match: 'v*', newest: 2, oldest: 1 }, /index "images" \(index\[0\]\)\.keep_tags\.0: unknown key "oldest"/],
  ])('refuses the keep_tags rule %j, naming the index and key', (rule, message) => {
    const err = refusal(ociHosted({ keep_tags: [rule] }));
    expect(err.message).toMatch(message);
    expect(err.index).toBe('images');
  });

  it.each([
    ['a hosted Python index', { name: 'py', route: 'root/py', hosted: true }, 'hosted python'],
    ['a cached OCI index', { name: 'hub', route: 'root/hub', ecosystem: 'oci', cached: 'https://registry.example/' }, 'cached oci'],
    ['a virtual OCI index', { name: 'all', route: 'root/all', ecosystem: 'oci', members: ['images'] }, 'virtual oci'],
  ])('refuses retention on %s, naming the index and the key', (_what, ix, kind) => {
    for (const key of ['untagged_after', 'keep_tags'] as const) {
      const value = key === 'untagged_after' ? '7d' : [{ match: '*', newest: 3 }];
      const base = { name: 'images', route: 'root/images', ecosystem: 'oci', hosted: true };
      const err = refusal({ index: [base, { ...ix, [key]: value }] });
      expect(err.message).toContain(`index "${ix.name}" (index[1]).${key}: retention applies only to a hosted oci index, this one is a ${kind} index`);
      expect(err.index).toBe(ix.name);
    }
  });

  it('refuses a bad [retention] every', () => {
    expect(refusal({ retention: { every: 'hourly' } }).message).toMatch(/retention\.every: must be seconds or a duration/);
    expect(refusal({ retention: { every: 0 } }).message).toMatch(/retention\.every: must be a duration of at least 1s/);
    expect(refusal({ retention: { often: '1h' } }).message).toMatch(/retention: unknown key "often"/);
  });
});
