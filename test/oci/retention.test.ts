/**
 * Retention of a hosted OCI index, with crane and oras (fs, and s3 with VELODEX_TEST_STORAGE=s3):
 * `untagged_after = "2s"` and `keep_tags = [{ match = "v*", newest = 2 }]` over a repository
 * holding tagged images, a tag moved to a new image, an image pushed by digest, a tagged image
 * index and one whose tag a client deleted, and referrers (oras attach) on a kept image and on one
 * that goes. The dry run (`velodex retention --dry-run`, `POST /+admin/retention?dry_run=1`,
 * and `velodex retention --url`, which asks the running server) lists exactly what goes and
 * changes nothing; the real run deletes it through the DELETE path:
 * crane pulls of what went fail with MANIFEST_UNKNOWN, everything kept still pulls, crane ls
 * shows the newest two v* tags and every other tag, the webhook receiver gets the same `delete`
 * events a client's DELETE sends, and the metrics count it. A second run finds nothing to do.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RetentionReport } from '../../registry/src/lifecycle/retention.js';
import { Receiver } from '../events/receiver.js';
import { admin, oci, toml } from '../support/config.js';
import { buildImage, buildIndex, writeLayout, type Image, type ImageIndex } from '../support/oci-image.js';
import { CLI, tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const TOKEN = 'retention-upload-token-7f3a';
const ADMIN = 'retention-admin-token-0c91d2e7';
const HOOK = '/hook';
const receiver = new Receiver();
let server: Velodex;
let work: string;
let host: string;
let repo: string;

function crane(args: string[], opts: { input?: string; allowFailure?: boolean } = {}): Promise<RunResult> {
  return run(tool('crane'), [...args, '--insecure'], { env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, input: opts.input, allowFailure: opts.allowFailure, timeoutMs: 180_000 });
}

function oras(args: string[], cwd: string): Promise<RunResult> {
  return run(tool('oras'), [...args, '--plain-http'], { cwd, env: { HOME: work, DOCKER_CONFIG: join(work, 'docker') }, timeoutMs: 180_000 });
}

/** `velodex retention` on the server's config and data dir; the JSON report. */
async function retentionCommand(...flags: string[]): Promise<RetentionReport> {
  const res = await run(process.execPath, [CLI, 'retention', '--config', join(server.dataDir, 'velodex.toml'), '--data-dir', server.dataDir, '--json', ...flags]);
  return JSON.parse(res.stdout) as RetentionReport;
}

/** `velodex retention --url`: the running server's run, its JSON report; the admin token from the environment. */
function retentionAtUrl(token: string, ...flags: string[]): Promise<RunResult> {
  return run(process.execPath, [CLI, 'retention', '--url', server.url, '--json', ...flags], { env: { VELODEX_ADMIN_TOKEN: token }, allowFailure: true });
}

/** `token`: the admin token by default; null sends none. */
const adminRetention = (query = '', token: string | null = ADMIN) =>
  fetch(`${server.url}/+admin/retention${query}`, { method: 'POST', headers: token !== null ? { authorization: `Bearer ${token}` } : {} });

/** Pushes one image or index from a layout of its own to `ref`. */
async function push(name: string, item: Image | ImageIndex, ref: string): Promise<void> {
  await crane(['push', writeLayout(join(work, `layout-${name}`), [{ tag: 'x', item }]), ref]);
}

/** oras attach of a small artifact to `ref`; the referrer's digest. */
async function attach(name: string, ref: string): Promise<string> {
  const dir = join(work, `attach-${name}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'sig.txt'), `signature of ${ref}\n`);
  const res = await oras(['attach', '-u', '__token__', '-p', TOKEN, '--artifact-type', 'application/vnd.example.signature', '--format', 'json', ref, 'sig.txt:text/plain'], dir);
  return (JSON.parse(res.stdout) as { digest: string }).digest;
}

const image = (seed: string) => buildImage({ seed: `retention-${seed}`, layers: 1, bigFileSize: 2048 });
const digestOf = (item: Image | ImageIndex) => ('index' in item ? item.index : item.manifest).descriptor.digest;

// What the suite pushes (see the file comment); filled in by beforeAll.
const v = [image('v1'), image('v2'), image('v3'), image('v4')];
const latest = image('latest');
const devOld = image('dev-old');
const devNew = image('dev-new');
const byDigest = image('by-digest');
const multi = buildIndex('retention-multi', undefined, 1);
const oldMulti = buildIndex('retention-old-multi', undefined, 1);
const clientDeleted = image('client-deleted');
let sigOfV1: string;
let sigOfV4: string;
let clientEvents: Record<string, unknown>[];

beforeAll(async () => {
  await receiver.start();
  work = tempDir('velodex-retention-');
  server = await startVelodex({
    config: toml(oci.hosted('oci', { token: TOKEN, untaggedAfter: '2s', keepTags: [{ match: 'v*', newest: 2 }], webhooks: [{ url: `${receiver.url}${HOOK}` }] }), admin(ADMIN)),
  });
  host = `127.0.0.1:${server.port}`;
  repo = `${host}/root/oci/retention/app`;
  await crane(['auth', 'login', host, '-u', '__token__', '--password-stdin'], { input: TOKEN });

  // One tag at a time, so each v* tag is pushed after the one before it.
  for (const [i, img] of v.entries()) await push(`v${i + 1}`, img, `${repo}:v${i + 1}`);
  sigOfV1 = await attach('v1', `${repo}:v1`);
  sigOfV4 = await attach('v4', `${repo}:v4`);
  await push('latest', latest, `${repo}:latest`);
  await crane(['tag', `${repo}:latest`, 'stable']);
  await push('dev-old', devOld, `${repo}:dev`);
  await push('dev-new', devNew, `${repo}:dev`);
  await push('by-digest', byDigest, `${repo}@${digestOf(byDigest)}`);
  await push('multi', multi, `${repo}:multi`);
  await push('old-multi', oldMulti, `${repo}:old-multi`);
  await push('client-deleted', clientDeleted, `${repo}:client-deleted`);
  // A client's DELETEs: a tag, and a manifest by digest. Their events are what retention's must look like.
  await crane(['delete', `${repo}:old-multi`]);
  await crane(['delete', `${repo}@${digestOf(clientDeleted)}`]);
  clientEvents = (await receiver.waitFor(HOOK, 2)).map((d) => d.json);
  // Everything pushed is now older than untagged_after.
  await new Promise((r) => setTimeout(r, 2_500));
}, 300_000);

afterAll(async () => {
  await server?.stop();
  await receiver.stop();
});

const hexOf = (digest: string) => digest.slice('sha256:'.length);
/** What retention must delete: digest -> the tags keep_tags removes from it first. */
const expectedDeleted = () =>
  new Map<string, string[]>([
    [digestOf(v[0]!), ['v1']],
    [digestOf(v[1]!), ['v2']],
    [sigOfV1, []],
    [digestOf(devOld), []],
    [digestOf(byDigest), []],
    [digestOf(oldMulti), []],
    ...oldMulti.images.map((img): [string, string[]] => [digestOf(img), []]),
  ]);
const keptRefs = () => [
  ...['v3', 'v4', 'latest', 'stable', 'dev', 'multi'].map((t) => `${repo}:${t}`),
  `${repo}@${sigOfV4}`,
  ...multi.images.map((img) => `${repo}@${digestOf(img)}`),
];

/** The report's one repository, as sets a test can compare. */
function planOf(report: RetentionReport) {
  expect(report.indexes.map((ix) => ix.index)).toEqual(['oci']);
  const repos = report.indexes[0]!.repositories;
  expect(repos.map((r) => r.repository)).toEqual(['retention/app']);
  const r = repos[0]!;
  return {
    untagged: r.untagged.map((u) => `${u.tag} ${u.digest}`).sort(),
    deleted: new Map(r.deleted.map((d) => [d.digest, d.tags])),
    order: r.deleted.map((d) => d.digest),
    rules: new Map(r.deleted.map((d) => [d.digest, d.rule])),
    skipped: r.skipped ?? [],
  };
}

describe('retention of a hosted OCI index', () => {
  it('dry run: the command and the admin endpoint list exactly what would go, and nothing changes', async () => {
    const fromCommand = await retentionCommand('--dry-run');
    const res = await adminRetention('?dry_run=1');
    expect(res.status).toBe(200);
    const fromAdmin = (await res.json()) as RetentionReport;
    const atUrl = await retentionAtUrl(ADMIN, '--dry-run');
    expect(atUrl.code, atUrl.stderr).toBe(0);
    const fromUrl = JSON.parse(atUrl.stdout) as RetentionReport;
    for (const report of [fromCommand, fromAdmin, fromUrl]) {
      expect(report.dryRun).toBe(true);
      const plan = planOf(report);
      expect(plan.untagged).toEqual([`v1 ${digestOf(v[0]!)}`, `v2 ${digestOf(v[1]!)}`]);
      expect(plan.deleted).toEqual(expectedDeleted());
      expect(plan.rules.get(sigOfV1)).toBe(`with its subject ${digestOf(v[0]!)}`);
      expect(plan.rules.get(digestOf(devOld))).toBe('untagged_after = "2s"');
      // A referrer before its subject, an index before its children.
      expect(plan.order.indexOf(sigOfV1)).toBeLessThan(plan.order.indexOf(digestOf(v[0]!)));
      for (const img of oldMulti.images) expect(plan.order.indexOf(digestOf(oldMulti))).toBeLessThan(plan.order.indexOf(digestOf(img)));
    }
    // Nothing changed: every tag is still there and everything still pulls.
    expect((await crane(['ls', repo])).stdout.trim().split('\n').sort()).toEqual(['dev', 'latest', 'multi', 'stable', 'v1', 'v2', 'v3', 'v4']);
    for (const digest of expectedDeleted().keys()) await crane(['manifest', `${repo}@${digest}`]);
    expect(receiver.at(HOOK)).toHaveLength(2);
  }, 300_000);

  it('the admin endpoint needs the admin token', async () => {
    expect((await adminRetention('?dry_run=1', null)).status).toBe(401);
    expect((await adminRetention('', 'not-the-admin-token')).status).toBe(401);
    const refused = await retentionAtUrl('not-the-admin-token');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('refused the admin token (401: the admin token is wrong)');
    // A dry_run it cannot read is refused, not taken for a real run.
    const unclear = await adminRetention('?dry_run=on');
    expect(unclear.status).toBe(400);
    expect(await unclear.text()).toContain('dry_run');
  });

  it('the run deletes them through the DELETE path: crane sees them gone, the rest pulls, the webhooks hear it', async () => {
    const res = await adminRetention();
    expect(res.status).toBe(200);
    const report = (await res.json()) as RetentionReport;
    expect(report.dryRun).toBe(false);
    const plan = planOf(report);
    expect(plan.skipped).toEqual([]);
    expect(plan.untagged).toEqual([`v1 ${digestOf(v[0]!)}`, `v2 ${digestOf(v[1]!)}`]);
    expect(plan.deleted).toEqual(expectedDeleted());

    for (const digest of expectedDeleted().keys()) {
      const gone = await crane(['pull', `${repo}@${digest}`, join(work, `gone-${hexOf(digest).slice(0, 12)}.tar`)], { allowFailure: true });
      expect(gone.code).not.toBe(0);
      expect(gone.stderr).toContain('MANIFEST_UNKNOWN');
    }
    for (const [i, ref] of keptRefs().entries()) await crane(['pull', '--format', 'oci', ref, join(work, `kept-${i}`)]);
    expect((await crane(['ls', repo])).stdout.trim().split('\n').sort()).toEqual(['dev', 'latest', 'multi', 'stable', 'v3', 'v4']);
    const referrers = (await (await fetch(`${server.url}/v2/root/oci/retention/app/referrers/${digestOf(v[3]!)}`)).json()) as { manifests: { digest: string }[] };
    expect(referrers.manifests.map((m) => m.digest)).toEqual([sigOfV4]);

    // The same `delete` events a client's DELETE sends: a tag's (with the tag as `version`) and a manifest's.
    const events = (await receiver.waitFor(HOOK, 2 + 2 + expectedDeleted().size)).slice(2).map((d) => d.json);
    // Delivered in any order: the tag's names it as `version`.
    const clientTag = clientEvents.find((e) => 'version' in e)!;
    const clientManifest = clientEvents.find((e) => !('version' in e))!;
    expect(clientTag).toMatchObject({ event: 'delete', index: 'oci', local_index: 'oci', project: 'retention/app', version: 'old-multi', file: { filename: digestOf(oldMulti) } });
    expect(clientManifest).toMatchObject({ event: 'delete', project: 'retention/app', file: { filename: digestOf(clientDeleted), sha256: hexOf(digestOf(clientDeleted)) } });
    expect(clientManifest).not.toHaveProperty('version');
    const shape = (e: Record<string, unknown>) => Object.keys(e).filter((k) => k !== 'request_id' && k !== 'created_at').sort();
    const untags = events.filter((e) => 'version' in e);
    const deletes = events.filter((e) => !('version' in e));
    expect(untags.map((e) => `${String(e.version)} ${(e.file as { filename: string }).filename}`).sort()).toEqual(plan.untagged);
    expect(deletes.map((e) => (e.file as { filename: string }).filename).sort()).toEqual([...expectedDeleted().keys()].sort());
    for (const e of untags) expect({ shape: shape(e), event: e.event, index: e.index, project: e.project }).toEqual({ shape: shape(clientTag), event: 'delete', index: 'oci', project: 'retention/app' });
    for (const e of deletes) expect({ shape: shape(e), event: e.event, index: e.index, project: e.project }).toEqual({ shape: shape(clientManifest), event: 'delete', index: 'oci', project: 'retention/app' });

    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toContain(`velodex_index_retention_deleted_total{index="root/oci",ecosystem="oci",role="hosted"} ${expectedDeleted().size}`);
    expect(metrics).toContain('velodex_index_retention_untagged_total{index="root/oci",ecosystem="oci",role="hosted"} 2');
    expect(server.logs()).toContain('"retention run finished"');
  }, 300_000);

  it('a second run, by the command, finds nothing left to do', async () => {
    const report = await retentionCommand();
    expect(report.dryRun).toBe(false);
    expect(report.indexes).toEqual([{ index: 'oci', repositories: [] }]);
  }, 120_000);
});
