/**
 * Start-up checks of the s3 backend against a real MinIO: a usable bucket connects, and each way
 * of pointing at an unusable one (wrong keys, missing bucket, dead or silent endpoint, a store
 * that ignores conditional writes) stops start-up with one ConfigError naming the key to fix and
 * never a key's value.
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../registry/src/config/errors.js';
import { Secret } from '../../registry/src/config/secret.js';
import type { StorageConfig } from '../../registry/src/config/types.js';
import { connectS3, s3Location } from '../../registry/src/storage/s3/connect.js';
import { startMinio, type Minio } from '../support/minio.js';
import { freePort } from '../support/pypiserver.js';

let minio: Minio;
beforeAll(async () => {
  minio = await startMinio();
});
afterAll(async () => {
  await minio?.stop();
});

function config(overrides: Partial<StorageConfig> = {}): StorageConfig {
  return {
    backend: 's3',
    path: '',
    endpoint: minio.endpoint,
    bucket: minio.bucket,
    region: 'us-east-1',
    prefix: '',
    accessKey: new Secret(minio.accessKey, 'inline'),
    secretKey: new Secret(minio.secretKey, 'inline'),
    ...overrides,
  };
}

/** The ConfigError `connectS3` stops with; checks it is one line that quotes no key. */
async function refusal(cfg: StorageConfig, timeoutMs?: number): Promise<ConfigError> {
  const err = await connectS3(cfg, { timeoutMs }).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  const message = (err as ConfigError).message;
  expect(message.split('\n')).toHaveLength(1);
  for (const secret of [minio.accessKey, minio.secretKey, 'wrong-secret-value', 'nobody-key']) expect(message).not.toContain(secret);
  return err as ConfigError;
}

async function listen(server: Server | ReturnType<typeof createTcpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

describe('connecting to the s3 backend at start-up', () => {
  it('connects to a usable bucket, with the prefix as a folder', async () => {
    const loc = await connectS3(config({ prefix: 'velodex/prod' }));
    expect(loc.prefix).toBe('velodex/prod/');
    expect(loc.bucket).toBe(minio.bucket);
    expect(loc.endpoint).toBe(minio.endpoint);
    // The probe leaves nothing behind.
    const left = await minio.client.listObjectsV2Query(minio.bucket, 'velodex/prod/probe/', '', '', 10, '');
    expect(left.objects).toEqual([]);
  });

  it('refuses a wrong secret key', async () => {
    const err = await refusal(config({ secretKey: new Secret('wrong-secret-value', 'env:S3_SECRET') }));
    expect(err.where).toBe('storage.secret_key');
    expect(err.message).toContain('SignatureDoesNotMatch');
  });

  it('refuses an unknown access key', async () => {
    const err = await refusal(config({ accessKey: new Secret('nobody-key', 'inline') }));
    expect(err.where).toBe('storage.access_key');
    expect(err.message).toContain('InvalidAccessKeyId');
  });

  it('refuses a bucket that does not exist', async () => {
    const err = await refusal(config({ bucket: 'no-such-bucket' }));
    expect(err.where).toBe('storage.bucket');
    expect(err.message).toMatch(/bucket "no-such-bucket" at http:\/\/127\.0\.0\.1:\d+ does not exist/);
  });

  it('refuses an endpoint where nothing listens', async () => {
    const port = await freePort();
    const err = await refusal(config({ endpoint: `http://127.0.0.1:${port}` }));
    expect(err.where).toBe('storage.endpoint');
    expect(err.message).toContain(`cannot reach http://127.0.0.1:${port} (ECONNREFUSED)`);
  });

  it('refuses an endpoint that accepts connections and never answers', async () => {
    const sockets: Socket[] = [];
    const silent = createTcpServer((s) => sockets.push(s));
    const port = await listen(silent);
    try {
      const err = await refusal(config({ endpoint: `http://127.0.0.1:${port}` }), 500);
      expect(err.where).toBe('storage.endpoint');
      expect(err.message).toContain('did not answer within 0.5 s');
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  it('refuses a store that ignores conditional writes', async () => {
    // Answers like S3 but applies every PUT, conditions or not.
    const lax = createHttpServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.method === 'GET') {
          res.writeHead(200, { 'content-type': 'application/xml' });
          res.end('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><KeyCount>0</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>');
        } else if (req.method === 'PUT') {
          res.writeHead(200, { etag: '"99914b932bd37a50b983c5e7c90ae93b"' });
          res.end();
        } else {
          res.writeHead(204);
          res.end();
        }
      });
    });
    const port = await listen(lax);
    try {
      const err = await refusal(config({ endpoint: `http://127.0.0.1:${port}` }));
      expect(err.where).toBe('storage.endpoint');
      expect(err.message).toContain('ignores conditional writes');
    } finally {
      lax.close();
    }
  });

  it('refuses endpoints and prefixes it cannot use, before any request', () => {
    const cases: Array<[Partial<StorageConfig>, string, RegExp]> = [
      [{ endpoint: 'ftp://127.0.0.1:21' }, 'storage.endpoint', /must be http or https/],
      [{ endpoint: 'http://user:pw@127.0.0.1:9000' }, 'storage.endpoint', /must not carry credentials/],
      [{ endpoint: 'http://127.0.0.1:9000/bucket' }, 'storage.endpoint', /no path/],
      [{ endpoint: undefined }, 'storage.endpoint', /is required/],
      [{ bucket: undefined }, 'storage.bucket', /is required/],
      [{ secretKey: undefined }, 'storage.secret_key', /is required/],
      [{ prefix: '/abs' }, 'storage.prefix', /not a clean key prefix/],
      [{ prefix: 'a//b' }, 'storage.prefix', /not a clean key prefix/],
      [{ prefix: 'a/../b' }, 'storage.prefix', /not a clean key prefix/],
    ];
    for (const [override, where, problem] of cases) {
      let caught: unknown;
      try {
        s3Location(config(override));
      } catch (err) {
        caught = err;
      }
      expect(caught, where).toBeInstanceOf(ConfigError);
      expect((caught as ConfigError).where).toBe(where);
      expect((caught as ConfigError).message).toMatch(problem);
      expect((caught as ConfigError).message).not.toContain('pw@');
    }
    expect(s3Location(config({ prefix: 'a/b/' })).prefix).toBe('a/b/');
    expect(s3Location(config({ prefix: '' })).prefix).toBe('');
  });
});
