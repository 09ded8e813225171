/**
 * A small token realm for a distribution registry started with token auth, as Docker Hub's
 * auth.docker.io is for Docker Hub: `GET /token?service=...&scope=...` answers an RS256 JWT the
 * registry checks against the JWKS file written here. Anonymous callers get pull; callers with
 * one of `users`' passwords (Basic) get pull and push; a wrong password is 401. Every fetch is
 * recorded (scope, user), so a test can count token fetches per scope.
 *
 * The realm uses the hostname `localhost`: crane refuses a realm on a loopback IP other than the
 * registry's own address.
 */
import { createSign, generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface TokenFetch {
  service: string | null;
  scopes: string[];
  /** The Basic user, when credentials were sent and accepted. */
  user?: string;
}

export interface TokenServerOptions {
  /** Where the JWKS file goes. */
  dir: string;
  /** Basic users that may push (and pull). */
  users?: Record<string, string>;
  /** Anonymous callers get pull (default true); false: anonymous tokens carry no access. */
  anonymousPull?: boolean;
  /** `expires_in` of every token, seconds. */
  expiresInSecs?: number;
  /** Which field carries the token: `token` (default) or the OAuth2 `access_token`. */
  field?: 'token' | 'access_token';
}

export interface TokenServer {
  realm: string;
  service: string;
  issuer: string;
  jwksFile: string;
  readonly fetches: readonly TokenFetch[];
  /** Fetches whose scopes include `scope`. */
  count(scope: string): number;
  set(opts: Pick<TokenServerOptions, 'expiresInSecs' | 'field'>): void;
  close(): Promise<void>;
}

const b64url = (data: Buffer | string): string => Buffer.from(data).toString('base64url');

export async function startTokenServer(opts: TokenServerOptions): Promise<TokenServer> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = randomUUID();
  const jwk = { ...(publicKey.export({ format: 'jwk' }) as Record<string, unknown>), kid, use: 'sig', alg: 'RS256' };
  const jwksFile = join(opts.dir, 'jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys: [jwk] }));
  const service = 'upstream-registry';
  const issuer = 'velodex-test-issuer';
  const fetches: TokenFetch[] = [];
  let expiresInSecs = opts.expiresInSecs ?? 300;
  let field = opts.field ?? 'token';

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== '/token') {
      res.writeHead(404).end();
      return;
    }
    let user: string | undefined;
    const auth = req.headers.authorization;
    if (auth !== undefined) {
      const m = /^Basic\s+(\S+)$/i.exec(auth);
      const decoded = m?.[1] ? Buffer.from(m[1], 'base64').toString('utf8') : '';
      const colon = decoded.indexOf(':');
      const name = decoded.slice(0, colon);
      if (colon === -1 || opts.users?.[name] === undefined || opts.users[name] !== decoded.slice(colon + 1)) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"details":"wrong credentials"}');
        return;
      }
      user = name;
    }
    const scopes = url.searchParams.getAll('scope');
    fetches.push({ service: url.searchParams.get('service'), scopes, ...(user !== undefined ? { user } : {}) });
    const access = scopes.flatMap((scope) => grant(scope, user !== undefined, opts.anonymousPull ?? true));
    const token = sign(privateKey, kid, { iss: issuer, sub: user ?? '', aud: service, access }, expiresInSecs);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ [field]: token, expires_in: expiresInSecs, issued_at: new Date().toISOString() }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    realm: `http://localhost:${port}/token`,
    service,
    issuer,
    jwksFile,
    fetches,
    count: (scope) => fetches.filter((f) => f.scopes.includes(scope)).length,
    set(next) {
      if (next.expiresInSecs !== undefined) expiresInSecs = next.expiresInSecs;
      if (next.field !== undefined) field = next.field;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `repository:<name>:<actions>` -> the access entry the registry reads. */
function grant(scope: string, authenticated: boolean, anonymousPull: boolean): Array<{ type: string; name: string; actions: string[] }> {
  const parts = scope.split(':');
  if (parts.length < 3) return [];
  const actions = parts.at(-1)!.split(',');
  const name = parts.slice(1, -1).join(':');
  const allowed = actions.filter((a) => (a === 'pull' ? authenticated || anonymousPull : authenticated));
  return [{ type: parts[0]!, name, actions: allowed }];
}

function sign(key: KeyObject, kid: string, claims: Record<string, unknown>, expiresInSecs: number): string {
  const now = Math.floor(Date.now() / 1000);
  const header = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid }));
  const payload = b64url(JSON.stringify({ ...claims, iat: now, nbf: now - 5, exp: now + expiresInSecs, jti: randomUUID() }));
  const signer = createSign('RSA-SHA256');
  signer.update(`${header}.${payload}`);
  return `${header}.${payload}.${b64url(signer.sign(key))}`;
}
