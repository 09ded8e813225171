/**
 * Who reads a private index (registry/src/access/readers.ts), on a controlled clock: the index's
 * credentials, a virtual index's readers through its private members, and a password remembered
 * after its first check that is still refused once its token expires.
 */
import { describe, expect, it } from 'vitest';
import { readVerdict } from '../../registry/src/access/readers.js';
import { Secret } from '../../registry/src/config/secret.js';
import type { IndexConfig, IndexToken, TokenScope } from '../../registry/src/config/types.js';

const T0 = Date.parse('2027-01-01T00:00:00Z');
const token = (name: string, secret: string, scopes: TokenScope[], expiresAt?: number): IndexToken => ({
  name,
  secret: new Secret(secret, 'inline'),
  scopes,
  ...(expiresAt !== undefined ? { expiresAt: new Date(expiresAt) } : {}),
});
const base = { routeSegments: [], ecosystem: 'python', policy: { denyProjects: [], allowProjects: [] }, webhooks: [], serviceAccounts: [] };
const vault: IndexConfig = {
  ...base,
  name: 'vault',
  route: 'vault',
  role: 'hosted',
  volatile: false,
  trustedPublishers: [],
  uploadToken: new Secret('vault-upload', 'inline'),
  private: true,
  tokens: [token('reader', 'vault-read', ['read'], T0 + 60_000), token('ci', 'vault-ci', ['upload'])],
};
const open: IndexConfig = { ...base, name: 'open', route: 'open', role: 'hosted', volatile: false, trustedPublishers: [], private: false, tokens: [token('other', 'open-read', ['read'])] };
const view: IndexConfig = { ...base, name: 'view', route: 'view', role: 'virtual', members: ['vault', 'open'], private: true, tokens: [token('own', 'view-read', ['read'])] };
const byName = new Map([vault, open, view].map((ix) => [ix.name, ix]));

describe('readers of a private index', () => {
  it('the upload token and every named token of the index read it (upload implies read); others do not', () => {
    for (const password of ['vault-upload', 'vault-read', 'vault-ci']) expect(readVerdict(vault, password, byName, T0).kind, password).toBe('reads');
    for (const password of [undefined, 'open-read', 'view-read', 'nothing']) expect(readVerdict(vault, password, byName, T0).kind, String(password)).toBe('refused');
    expect(readVerdict(open, undefined, byName, T0).kind).toBe('reads');
  });

  it('a virtual index is read with its own tokens or with a credential that reads its private members', () => {
    for (const password of ['view-read', 'vault-read', 'vault-upload']) expect(readVerdict(view, password, byName, T0).kind, password).toBe('reads');
    expect(readVerdict(view, 'open-read', byName, T0).kind).toBe('refused');
  });

  it('a password remembered after its first check is refused once its token expires, as expired', () => {
    expect(readVerdict(vault, 'vault-read', byName, T0 + 59_000).kind).toBe('reads');
    expect(readVerdict(vault, 'vault-read', byName, T0 + 60_000)).toMatchObject({ kind: 'expired', token: { name: 'reader' } });
    expect(readVerdict(view, 'vault-read', byName, T0 + 61_000)).toMatchObject({ kind: 'expired' });
  });
});
