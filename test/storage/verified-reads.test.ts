/**
 * A blob whose stored bytes were changed behind the server's back (disk rot, a person editing the
 * bucket) is never served as if it were the blob: a whole read is hashed on its way out, and a
 * mismatch cuts the transfer (a client that knows the length sees it short) or, when not one
 * byte went out yet, answers 500. The event is logged and counted as `rejected`, in `/+stats`
 * and `/metrics`. Ranged reads cannot be verified and are served as stored (docs/storage.md).
 *
 * Runs on the suite's backend (fs by default, s3 with VELODEX_TEST_STORAGE=s3): the stored bytes
 * are changed through `overwriteBlob`, the one place that knows each backend's layout.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProject } from '../python/fixtures/projects.js';
import { PROJECT_ENV } from '../python/fixtures/clients.js';
import { hosted, oci, toml } from '../support/config.js';
import { buildImage, pseudoRandom, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { overwriteBlob } from '../support/store-probe.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { Registry } from '../oci/api-support.js';

const TOKEN = 'verified-reads-token-81c4';
const MiB = 1024 * 1024;
let server: Velodex;
let work: string;
let reg: Registry;

beforeAll(async () => {
  work = tempDir('velodex-verified-');
  server = await startVelodex({
    config: toml(hosted('py', { route: 'team/py', token: TOKEN }), oci.hosted('images', { route: 'team/images', token: TOKEN })),
  });
  reg = new Registry(server.url, `Basic ${Buffer.from(`__token__:${TOKEN}`).toString('base64')}`);
});

afterAll(async () => {
  await server?.stop();
});

/** The same length, other bytes: what a flipped disk block or a wrong upload to the bucket leaves. */
function changed(bytes: Buffer): Buffer {
  const out = Buffer.from(bytes);
  const at = Math.floor(out.length / 2);
  out[at] = (out[at] ?? 0) ^ 0xff;
  return out;
}

/** `curl` a URL to a file: its exit code (18: the transfer ended short), the status and what arrived. */
async function curl(url: string, extra: string[] = []): Promise<{ code: number; status: number; body: Buffer }> {
  const file = join(work, `curl-${Date.now()}-${Math.random().toString(16).slice(2)}`);
  const res = await run(tool('curl'), ['-sS', '-o', file, '-w', '%{http_code}', ...extra, url], { allowFailure: true });
  return { code: res.code, status: Number(res.stdout.trim()), body: existsSync(file) ? readFileSync(file) : Buffer.alloc(0) };
}

async function rejected(route: string): Promise<number> {
  const res = await fetch(`${server.url}/+stats?index=${route}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { totals: { rejected: number } }).totals.rejected;
}

async function rejectedMetric(route: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('velodex_index_rejected_total{') && l.includes(`index="${route}"`));
  return Number(line?.split(' ').pop() ?? NaN);
}

describe('a blob changed in the store', () => {
  it('a large one ends in a broken transfer, never a complete wrong body; rejected is counted and logged', async () => {
    const bytes = pseudoRandom('verified/large', 3 * MiB);
    const hex = await reg.pushBlob('team/images/app', bytes);
    const url = `${server.url}/v2/team/images/app/blobs/sha256:${hex}`;
    const good = await curl(url);
    expect(good.code).toBe(0);
    expect(good.body.equals(bytes)).toBe(true);

    await overwriteBlob(server.dataDir, hex, changed(bytes));
    const before = await rejected('team/images');
    const bad = await curl(url);
    // 18: "transfer closed with N bytes remaining to read".
    expect(bad.code, `curl exit ${bad.code}, status ${bad.status}`).toBe(18);
    expect(bad.status).toBe(200);
    expect(bad.body.length).toBeLessThan(bytes.length);
    expect(await rejected('team/images')).toBe(before + 1);
    expect(await rejectedMetric('team/images')).toBe(before + 1);
    expect(server.logs()).toMatch(new RegExp(`"event":"rejected".*"expected":"sha256:${hex}"`));

    // A range has no digest of its own: it is served as stored, unverified (docs/storage.md).
    const part = await curl(url, ['-r', '0-99']);
    expect(part.status).toBe(206);
    expect(part.body.equals(bytes.subarray(0, 100))).toBe(true);
  });

  it('a small one (one chunk) is a 500 before any byte, in the OCI error shape', async () => {
    const bytes = pseudoRandom('verified/small', 1000);
    const hex = await reg.pushBlob('team/images/app', bytes);
    await overwriteBlob(server.dataDir, hex, changed(bytes));
    const before = await rejected('team/images');
    const res = await fetch(`${server.url}/v2/team/images/app/blobs/sha256:${hex}`);
    expect(res.status).toBe(500);
    expect(((await res.json()) as { errors: { code: string }[] }).errors[0]?.code).toBe('INTERNAL_ERROR');
    expect(await rejected('team/images')).toBe(before + 1);
  });

  it('crane pull of an image with a changed layer fails; the intact image still pulls', async () => {
    const env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
    const crane = (args: string[], input?: string) => run(tool('crane'), [...args, '--insecure'], { env, input, allowFailure: true, timeoutMs: 180_000 });
    const host = `127.0.0.1:${server.port}`;
    expect((await crane(['auth', 'login', host, '-u', '__token__', '--password-stdin'], TOKEN)).code).toBe(0);
    const image = buildImage({ seed: 'verified-crane', layers: 2 });
    const ok = buildImage({ seed: 'verified-crane-ok', layers: 2 });
    for (const [tag, item] of [['bad', image], ['ok', ok]] as const) {
      const single = writeLayout(join(work, `crane-src-${tag}`), [{ tag, item }]);
      const pushed = await crane(['push', single, `${host}/team/images/crane:${tag}`]);
      expect(pushed.code, pushed.stderr).toBe(0);
    }
    const layer = image.layers[image.layers.length - 1]!;
    await overwriteBlob(server.dataDir, layer.descriptor.digest.slice('sha256:'.length), changed(layer.bytes));
    const before = await rejected('team/images');

    const bad = await crane(['pull', '--format', 'oci', `${host}/team/images/crane:bad`, join(work, 'pulled-bad')]);
    expect(bad.code).not.toBe(0);
    expect(await rejected('team/images')).toBeGreaterThan(before);
    const good = await crane(['pull', '--format', 'oci', `${host}/team/images/crane:ok`, join(work, 'pulled-ok')]);
    expect(good.code, good.stderr).toBe(0);
  });

  it('pip download of a changed wheel fails and saves nothing; rejected counts for the Python index', async () => {
    const alpha = await buildProject('alpha', '1.0', { variant: 'verified-reads' });
    const up = await run(tool('twine'), ['upload', '--disable-progress-bar', '--non-interactive', '--repository-url', `${server.url}/team/py/`, '-u', '__token__', '-p', TOKEN, alpha.wheel], {
      allowFailure: true,
      env: { NO_COLOR: '1' },
    });
    expect(up.code, up.stdout + up.stderr).toBe(0);
    const wheel = readFileSync(alpha.wheel);
    await overwriteBlob(server.dataDir, createHash('sha256').update(wheel).digest('hex'), changed(wheel));
    const before = await rejected('team/py');

    const dest = join(work, 'pip-dest');
    const pip = await run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '--index-url', `${server.url}/team/py/simple/`, '-d', dest, 'alpha==1.0'], {
      allowFailure: true,
      env: PROJECT_ENV,
    });
    expect(pip.code, pip.stdout + pip.stderr).not.toBe(0);
    expect(existsSync(dest) ? readdirSync(dest).filter((f) => statSync(join(dest, f)).size > 0) : []).toEqual([]);
    // pip retries a 500 a few times: each refused read counts.
    expect(await rejected('team/py')).toBeGreaterThan(before);
  });
});
