import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../support/raw-http.js';
import { startVelodex, type Velodex } from '../support/velodex.js';

describe('request paths', () => {
  let server: Velodex;
  beforeAll(async () => {
    server = await startVelodex();
  });
  afterAll(() => server.stop());

  it('answers 404 with a JSON message for a path no index serves', async () => {
    const res = await fetch(`${server.url}/nowhere/simple/`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { message: string }).message).toMatch(/no index serves \/nowhere\/simple/);
  });

  it.each([
    ['/root/hosted/simple/%2e%2e/', 'encoded dots'],
    ['/root/hosted/simple/../../etc/', 'dot-dot'],
    ['/root/hosted/files/./x', 'dot'],
    ['/root/hosted/files/a\\b', 'backslash'],
    ['/root/hosted/files/%2Fetc%2Fpasswd', 'encoded slash'],
    ['/root/hosted/files/a%5Cb', 'encoded backslash'],
    ['/root/hosted/files/a%00b', 'NUL'],
    ['/root/hosted//simple/', 'empty segment'],
  ])('refuses %s (%s) with 400', async (path) => {
    const res = await rawRequest(server.url, path);
    expect(res.status).toBe(400);
    expect((JSON.parse(res.body) as { message: string }).message).toMatch(/segment/);
  });

  it('never logs the upload token', async () => {
    const { readFileSync } = await import('node:fs');
    const token = readFileSync(`${server.dataDir}/upload-token`, 'utf8').trim();
    expect(token.length).toBeGreaterThan(20);
    await fetch(`${server.url}/root/hosted/`, { method: 'POST', headers: { authorization: `Basic ${Buffer.from(`__token__:${token}`).toString('base64')}` } });
    expect(server.logs()).not.toContain(token);
  });
});
