/** `[tls]`: both paths or neither, each missing one named; the files are read when serving, not when loading. */
import { describe, expect, it } from 'vitest';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { ConfigError } from '../../registry/src/config/errors.js';
import { parseConfigText } from '../../registry/src/config/load.js';

const load = (text: string) => parseConfigText(text, 'test.toml', { ecosystems, env: {} });

describe('[tls]', () => {
  it('is off without the table', () => {
    expect(load('').tls).toBeUndefined();
  });

  it('takes both paths, without reading them (a Secret may not be mounted yet)', () => {
    expect(load('[tls]\ncert_file = "/run/tls/tls.crt"\nkey_file = "/run/tls/tls.key"\n').tls).toEqual({ certFile: '/run/tls/tls.crt', keyFile: '/run/tls/tls.key' });
  });

  it.each([
    ['[tls]\ncert_file = "/c.pem"\n', 'tls.key_file', 'key_file not given'],
    ['[tls]\nkey_file = "/k.pem"\n', 'tls.cert_file', 'cert_file not given'],
    ['[tls]\n', 'tls.cert_file', 'cert_file and key_file not given'],
  ])('names what is missing: %j', (text, where, problem) => {
    const err = (() => {
      try {
        load(text);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).where).toBe(where);
    expect((err as ConfigError).problem).toContain(problem);
  });

  it('refuses an unknown key and an empty path', () => {
    expect(() => load('[tls]\ncert_file = "/c"\nkey_file = "/k"\nca_file = "/x"\n')).toThrow(/tls: unknown key "ca_file"/);
    expect(() => load('[tls]\ncert_file = ""\nkey_file = "/k"\n')).toThrow(/tls\.cert_file: must be the path of a PEM certificate chain/);
  });
});
