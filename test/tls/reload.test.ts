/**
 * A certificate rewritten in place is served without a restart (`tls/reload.ts`): the test
 * rewrites the files a running velodex was started with and polls what a new TLS connection is
 * shown. A rewritten pair that is no pair (a key of another certificate, a key file that is not
 * PEM) is refused with one warning per content and the served certificate stays. A pair that is
 * broken at start-up stops the start with a message naming the file, and no key text. The
 * per-address connection cap counts TLS connections too (they are the sockets requests come on).
 */
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, type TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testCa, type IssuedCertificate, type TestCa } from '../support/certificates.js';
import { connections, hosted, tls, toml } from '../support/config.js';
import { CLI } from '../support/paths.js';
import { run } from '../support/run.js';
import { until } from '../support/until.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { getTrusting, servedFingerprint } from './https.js';

let authority: TestCa;
let ca: Buffer;
let first: IssuedCertificate;
/** The paths in the config: the test rewrites these files, as the kubelet rewrites a mounted Secret. */
let served: { certFile: string; keyFile: string };
let server: Velodex;

const warnings = (event: string): string[] => server.logs().split('\n').filter((line) => line.includes(`"event":"${event}"`));

function install(cert: IssuedCertificate, key: IssuedCertificate = cert): void {
  copyFileSync(cert.certFile, served.certFile);
  copyFileSync(key.keyFile, served.keyFile);
}

const serves = (expected: string) => async () => ((await servedFingerprint(server.port, ca)) === expected ? true : undefined);

beforeAll(async () => {
  const dir = tempDir('velodex-tls-reload-');
  authority = testCa(dir);
  ca = readFileSync(authority.caFile);
  first = authority.issue('first');
  served = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  install(first);
  server = await startVelodex({ config: toml(hosted('hosted'), tls(served), connections({ maxPerClient: 2 })) });
});

afterAll(async () => {
  await server?.stop();
});

describe('reloading the certificate', () => {
  it('serves a rewritten certificate to new connections, without a restart', async () => {
    expect(await servedFingerprint(server.port, ca)).toBe(first.fingerprint256);
    const second = authority.issue('second');
    expect(second.fingerprint256).not.toBe(first.fingerprint256);
    install(second);
    await until('the second certificate served', serves(second.fingerprint256), { timeoutMs: 30_000, context: () => server.logs() });
    expect(warnings('tls_reloaded').at(-1)).toContain('CN=velodex test second');
    expect((await getTrusting(`${server.url}/+api`, ca)).status).toBe(200);
  });

  it('keeps serving the current certificate when the rewritten files are no pair, warning once per content', async () => {
    const current = await servedFingerprint(server.port, ca);
    const third = authority.issue('third');
    const fourth = authority.issue('fourth');
    // The third certificate with the fourth's key: each parses, together they are no pair.
    install(third, fourth);
    await until('the mismatch refused', async () => (warnings('tls_reload_refused').length === 1 ? true : undefined), { timeoutMs: 30_000, context: () => server.logs() });
    expect(warnings('tls_reload_refused')[0]).toContain('is not the key of the certificate');
    expect(await servedFingerprint(server.port, ca)).toBe(current);

    // Another broken content: its warning comes two polls later at the earliest, polls in which
    // the mismatch above, already refused, was read again and not warned about again.
    writeFileSync(served.keyFile, 'not a key\n');
    await until('the second refusal', async () => (warnings('tls_reload_refused').length >= 2 ? true : undefined), { timeoutMs: 30_000, context: () => server.logs() });
    const refusals = warnings('tls_reload_refused');
    expect(refusals).toHaveLength(2);
    expect(refusals[1]).toContain('holds no PEM block');
    expect(await servedFingerprint(server.port, ca)).toBe(current);

    // Made whole again: served.
    install(third);
    await until('the third certificate served', serves(third.fingerprint256), { timeoutMs: 30_000, context: () => server.logs() });
    expect(server.logs()).not.toContain('BEGIN PRIVATE KEY');
  });
});

describe('a pair that is broken at start-up', () => {
  const start = async (files: { certFile: string; keyFile: string }) => {
    const dir = tempDir();
    const config = join(dir, 'velodex.toml');
    writeFileSync(config, toml(hosted('hosted'), tls(files)));
    return run(process.execPath, [CLI, 'serve', '--config', config, '--host', '127.0.0.1', '--port', '0', '--data-dir', dir], {
      env: { VELODEX_WORKERS: '1' },
      allowFailure: true,
      timeoutMs: 30_000,
    });
  };

  it('stops the start naming the file: a key of another certificate, an unreadable file, a key that is not PEM', async () => {
    const other = authority.issue('other');
    const mismatch = await start({ certFile: first.certFile, keyFile: other.keyFile });
    expect(mismatch.code).toBe(78);
    expect(mismatch.stderr).toContain(`the key in ${other.keyFile} is not the key of the certificate in ${first.certFile}`);

    const missing = await start({ certFile: join(tempDir(), 'absent.pem'), keyFile: first.keyFile });
    expect(missing.code).toBe(78);
    expect(missing.stderr).toMatch(/config: tls\.cert_file: cannot read \S+absent\.pem \(ENOENT\)/);

    // A key file with a PEM header and a body that is not a key: nothing of it is printed.
    const broken = join(tempDir(), 'broken.key');
    writeFileSync(broken, '-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVzLW5vdC1hLWtleQ==\n-----END PRIVATE KEY-----\n');
    const garbled = await start({ certFile: first.certFile, keyFile: broken });
    expect(garbled.code).toBe(78);
    expect(garbled.stderr).toContain(`${broken} does not parse as a PEM private key`);
    expect(`${garbled.stdout}${garbled.stderr}`).not.toContain('c2VjcmV0');
  });
});

describe('the connection cap over TLS', () => {
  it('answers 429 to the request of a TLS connection past the cap', async () => {
    const held: TLSSocket[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        held.push(await new Promise<TLSSocket>((resolve, reject) => {
          const socket = connect({ host: '127.0.0.1', port: server.port, ca }, () => resolve(socket));
          socket.once('error', reject);
        }));
      }
      const refused = await getTrusting(`${server.url}/+api`, ca);
      expect(refused.status).toBe(429);
      expect(refused.body).toContain('too many connections from one address');
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});
