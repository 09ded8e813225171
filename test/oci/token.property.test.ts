/**
 * The token realm's parsers of client bytes, property by property: the `scope` grammar (any input
 * gives an access or a ScopeError, and what it gives formats back to itself), and token
 * verification (any input gives a verdict and never throws; only a token this signer issued, within
 * its lifetime, for this service, passes: a forged signature, an edited payload, an expired token,
 * another audience or issuer, `alg: none` and any other algorithm are each refused for their reason).
 */
import { generateKeyPairSync } from 'node:crypto';
import fc from 'fast-check';
import { decodeJwt, SignJWT, UnsecuredJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { bearerChallenge } from '../../registry/src/oci/handlers/token/challenge.js';
import { grantsWrite, writeScope } from '../../registry/src/oci/handlers/token/credentials.js';
import { formatScope, parseScope, parseScopes, ScopeError, type Access } from '../../registry/src/oci/handlers/token/scope.js';
import { TOKEN_LIFETIME_SECS, TokenSigner } from '../../registry/src/oci/handlers/token/tokens.js';

const RUNS = { numRuns: 200 };
const KEY = Buffer.from('k'.repeat(40));
const OTHER_KEY = Buffer.from('o'.repeat(40));
const T0 = Date.parse('2026-01-01T00:00:00Z');

const component = fc.stringMatching(/^[a-z0-9]{1,8}(?:[._-][a-z0-9]{1,8}){0,2}$/);
const repoName = fc.array(component, { minLength: 1, maxLength: 5 }).map((s) => s.join('/'));
/** A name as docker writes it for another registry: with a `host:port/` in front. */
const name = fc.oneof(repoName, fc.tuple(component, fc.integer({ min: 1, max: 65535 }), repoName).map(([h, p, r]) => `${h}:${p}/${r}`));
const actions = fc.uniqueArray(fc.constantFrom('pull', 'push', 'delete', '*'), { minLength: 1, maxLength: 4 });
const access: fc.Arbitrary<Access> = fc.record({ type: fc.constantFrom('repository', 'registry', 'repository(plugin)'), name, actions });

describe('scope', () => {
  it('parses what it formats, names with a port included', () => {
    fc.assert(
      fc.property(access, (a) => {
        expect(parseScope(formatScope(a))).toEqual(a);
      }),
      RUNS,
    );
  });

  it('gives an access or a ScopeError for any input, and an access formats back to the same access', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 120 }), fc.stringMatching(/^[a-z()]{0,6}:[a-z:/. ]{0,10}:[a-z,*]{0,10}$/)), (text) => {
        let parsed: Access;
        try {
          parsed = parseScope(text);
        } catch (err) {
          expect(err).toBeInstanceOf(ScopeError);
          return;
        }
        expect(parsed.actions.length).toBeGreaterThan(0);
        expect(parseScope(formatScope(parsed))).toEqual(parsed);
      }),
      { numRuns: 500 },
    );
  });

  it('reads repeated parameters and space-separated scopes alike', () => {
    fc.assert(
      fc.property(fc.array(access, { maxLength: 4 }), (list) => {
        const texts = list.map(formatScope);
        expect(parseScopes(texts)).toEqual(list);
        expect(parseScopes([texts.join(' ')])).toEqual(list);
      }),
      RUNS,
    );
  });

  it('refuses malformed scopes with a message that shows the expected form', () => {
    for (const bad of ['repository', 'repository:app', ':app:pull', 'repository::pull', 'repository:app:', 'repository:app:pull,,push', 'Repo:app:pull', 'repository:a b:pull', `repository:${'a'.repeat(1100)}:pull`]) {
      expect(() => parseScope(bad), bad).toThrow(ScopeError);
    }
    expect(() => parseScope('repository:app')).toThrow(/type:name:actions/);
  });
});

describe('token verification', () => {
  const signer = new TokenSigner(KEY, () => T0);

  it('passes a token it issued, with the access it was given', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(access, { maxLength: 4 }), async (list) => {
        const issued = await signer.issue('uploader', list);
        expect(issued.expiresIn).toBe(TOKEN_LIFETIME_SECS);
        expect(await signer.verify(issued.token)).toEqual({ ok: true, subject: 'uploader', access: list, bindings: {} });
      }),
      { numRuns: 50 },
    );
  });

  it('carries the upload-token bindings it was given, as keyed fingerprints that differ per key and per secret', async () => {
    const bindings = { 'team-a': signer.bindingOf('token-a') };
    const { token } = await signer.issue('uploader', [], bindings);
    expect(await signer.verify(token)).toMatchObject({ ok: true, bindings });
    expect(JSON.stringify(decodeJwt(token))).not.toContain('token-a');
    expect(signer.bindingOf('token-a')).not.toBe(signer.bindingOf('token-b'));
    expect(signer.bindingOf('token-a')).not.toBe(new TokenSigner(OTHER_KEY).bindingOf('token-a'));
  });

  it('never throws and never passes anything but its own tokens', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ unit: 'binary', maxLength: 300 }), fc.array(fc.base64String({ maxLength: 60 }), { minLength: 3, maxLength: 3 }).map((p) => p.join('.'))), async (text) => {
        const verdict = await signer.verify(text);
        expect(verdict.ok).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a token signed with another key (forged) as bad-signature, whatever it claims', async () => {
    const forged = await new TokenSigner(OTHER_KEY, () => T0).issue('uploader', [{ type: 'repository', name: 'team/app', actions: ['push'] }]);
    expect(await signer.verify(forged.token)).toEqual({ ok: false, reason: 'bad-signature' });
    // Judged by the signature first: an expired forgery is still a forgery.
    const late = new TokenSigner(KEY, () => T0 + 3600_000);
    expect(await late.verify(forged.token)).toEqual({ ok: false, reason: 'bad-signature' });
  });

  it('refuses a token whose header or payload was edited', async () => {
    const { token } = await signer.issue('anonymous', [{ type: 'repository', name: 'team/app', actions: ['pull'] }]);
    const signed = token.slice(0, token.lastIndexOf('.'));
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: signed.length - 1 }), fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'), async (at, char) => {
        fc.pre(signed[at] !== char && signed[at] !== '.');
        const edited = `${signed.slice(0, at)}${char}${token.slice(at + 1)}`;
        const verdict = await signer.verify(edited);
        expect(verdict.ok).toBe(false);
      }),
      { numRuns: 100 },
    );
    // The payload re-encoded with a push grant, the signature kept.
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as { access: Access[] };
    claims.access = [{ type: 'repository', name: 'team/app', actions: ['pull', 'push'] }];
    const widened = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`;
    expect(await signer.verify(widened)).toEqual({ ok: false, reason: 'bad-signature' });
  });

  it('refuses a token past its lifetime (with 30 s of clock tolerance), and one not yet valid', async () => {
    const { token } = await signer.issue('uploader', []);
    const at = (ms: number) => new TokenSigner(KEY, () => T0 + ms).verify(token);
    expect((await at((TOKEN_LIFETIME_SECS + 20) * 1000)).ok).toBe(true);
    expect(await at((TOKEN_LIFETIME_SECS + 31) * 1000)).toEqual({ ok: false, reason: 'expired' });
    expect((await at(-120_000)).ok).toBe(false);
  });

  it('remembers a token that verified only for its lifetime, and hands out what it grants frozen', async () => {
    let now = T0;
    const clocked = new TokenSigner(KEY, () => now);
    const { token } = await clocked.issue('uploader', [{ type: 'repository', name: 'team/app', actions: ['pull'] }]);
    const first = await clocked.verify(token);
    expect(first.ok && Object.isFrozen(first.access[0])).toBe(true);
    now = T0 + (TOKEN_LIFETIME_SECS + 20) * 1000;
    expect(await clocked.verify(token)).toBe(first);
    now = T0 + (TOKEN_LIFETIME_SECS + 31) * 1000;
    expect(await clocked.verify(token)).toEqual({ ok: false, reason: 'expired' });
    now = T0 - 120_000;
    expect((await clocked.verify(token)).ok).toBe(false);
  });

  it('refuses a token for another service or from another issuer, though signed with the key', async () => {
    const sign = (aud: string, iss: string) =>
      new SignJWT({ access: [] }).setProtectedHeader({ alg: 'HS256' }).setAudience(aud).setIssuer(iss).setSubject('x').setIssuedAt(T0 / 1000).setExpirationTime(T0 / 1000 + 60).sign(KEY);
    expect(await signer.verify(await sign('registry.docker.io', 'velodex'))).toEqual({ ok: false, reason: 'wrong-claims' });
    expect(await signer.verify(await sign('velodex', 'auth.docker.io'))).toEqual({ ok: false, reason: 'wrong-claims' });
    expect((await signer.verify(await sign('velodex', 'velodex'))).ok).toBe(true);
  });

  it('refuses alg none, other algorithms, a missing expiry and a malformed access claim as malformed or wrong', async () => {
    const unsecured = new UnsecuredJWT({ access: [] }).setAudience('velodex').setIssuer('velodex').setSubject('x').setIssuedAt(T0 / 1000).setExpirationTime(T0 / 1000 + 60).encode();
    expect(await signer.verify(unsecured)).toEqual({ ok: false, reason: 'malformed' });
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rs256 = await new SignJWT({ access: [] }).setProtectedHeader({ alg: 'RS256' }).setAudience('velodex').setIssuer('velodex').setSubject('x').setIssuedAt(T0 / 1000).setExpirationTime(T0 / 1000 + 60).sign(privateKey);
    expect(await signer.verify(rs256)).toEqual({ ok: false, reason: 'malformed' });
    const noExpiry = await new SignJWT({ access: [] }).setProtectedHeader({ alg: 'HS256' }).setAudience('velodex').setIssuer('velodex').setSubject('x').setIssuedAt(T0 / 1000).sign(KEY);
    expect((await signer.verify(noExpiry)).ok).toBe(false);
    const badAccess = await new SignJWT({ access: [{ type: 'repository', name: 'a', actions: 'push' }] })
      .setProtectedHeader({ alg: 'HS256' }).setAudience('velodex').setIssuer('velodex').setSubject('x').setIssuedAt(T0 / 1000).setExpirationTime(T0 / 1000 + 60).sign(KEY);
    expect(await signer.verify(badAccess)).toEqual({ ok: false, reason: 'malformed' });
    expect(await signer.verify(`${'a'.repeat(9000)}.b.c`)).toEqual({ ok: false, reason: 'malformed' });
  });
});

describe('grants and challenges', () => {
  it('lets a write through only for the exact name with a write action', () => {
    fc.assert(
      fc.property(fc.array(access, { maxLength: 4 }), repoName, (list, wanted) => {
        const expected = list.some((a) => a.type === 'repository' && a.name === wanted && a.actions.some((x) => x !== 'pull'));
        expect(grantsWrite(list, wanted)).toBe(expected);
      }),
      RUNS,
    );
    expect(grantsWrite([{ type: 'repository', name: 'team-a/oci/app', actions: ['pull', 'push'] }], 'team-b/oci/app')).toBe(false);
    expect(grantsWrite([{ type: 'repository', name: 'team-a/oci/app', actions: ['pull'] }], 'team-a/oci/app')).toBe(false);
  });

  it('writes the challenge with the scope a write needs', () => {
    expect(bearerChallenge('http://reg.example/v2/token')).toBe('Bearer realm="http://reg.example/v2/token",service="velodex"');
    expect(bearerChallenge('http://r/v2/token', { scope: writeScope('team/app', 'PUT'), error: 'insufficient_scope' })).toBe(
      'Bearer realm="http://r/v2/token",service="velodex",scope="repository:team/app:pull,push",error="insufficient_scope"',
    );
    expect(writeScope('team/app', 'DELETE')).toBe('repository:team/app:delete');
  });
});
