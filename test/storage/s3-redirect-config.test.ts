/**
 * The `[storage]` keys of the s3 redirect: off by default, defaults when on, and refused where
 * they cannot work (the fs backend, a tuning key without `redirect = true`), with a message that
 * names the key.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../registry/src/config/errors.js';
import { DEFAULT_REDIRECT_MIN_SIZE, DEFAULT_REDIRECT_TTL_SECS, parseConfigText } from '../../registry/src/config/load.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';

const S3 = '[storage]\nbackend = "s3"\nendpoint = "http://127.0.0.1:9000"\nbucket = "b"\naccess_key = "ak"\nsecret_key = "sk"\n';
const load = (text: string) => parseConfigText(text, 'redirect.toml', { ecosystems, env: {} });

function refusal(text: string): ConfigError {
  try {
    load(text);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('the config was accepted');
}

describe('[storage] redirect', () => {
  it('is off unless asked for', () => {
    expect(load(S3).storage.redirect).toBeUndefined();
    expect(load(`${S3}redirect = false\n`).storage.redirect).toBeUndefined();
  });

  it('takes its defaults, or the given size, lifetime and endpoint', () => {
    expect(load(`${S3}redirect = true\n`).storage.redirect).toEqual({ minSize: DEFAULT_REDIRECT_MIN_SIZE, ttlSecs: DEFAULT_REDIRECT_TTL_SECS });
    const tuned = `${S3}redirect = true\nredirect_min_size = 0\nredirect_ttl_secs = 60\nredirect_endpoint = "https://s3.example.com"\n`;
    expect(load(tuned).storage.redirect).toEqual({ minSize: 0, ttlSecs: 60, endpoint: 'https://s3.example.com' });
  });

  it('is refused on the fs backend', () => {
    expect(refusal('[storage]\nredirect = true\n').message).toContain('storage.redirect');
  });

  it('refuses a tuning key without redirect = true', () => {
    expect(refusal(`${S3}redirect_ttl_secs = 60\n`).message).toContain('storage.redirect_ttl_secs');
  });

  it('refuses a lifetime S3 cannot sign', () => {
    expect(() => load(`${S3}redirect = true\nredirect_ttl_secs = 0\n`)).toThrow(/redirect_ttl_secs/);
    expect(() => load(`${S3}redirect = true\nredirect_ttl_secs = 604801\n`)).toThrow(/redirect_ttl_secs/);
  });
});
