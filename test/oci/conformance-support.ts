/**
 * Drives the OCI distribution-spec conformance suites (see conformance.test.ts for which and how
 * configured) against a registry URL, and judges their junit reports: every test the suite runs
 * must pass. Shared by the single-process run and the multi-process run behind a round-robin proxy
 * (sessions-shared.test.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { TOOLS, tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { tempDir } from '../support/velodex.js';

interface Case {
  name: string;
  status: string;
  failure?: string;
  /** What the test printed; the main-line suite gives its reason for a skip here. */
  output: string;
}

function decode(s: string): string {
  return s
    .replace(/&#x([0-9a-f]+);/gi, (_, h: string) => String.fromCodePoint(parseInt(h, 16)))
    .replace(/&#(\d+);/g, (_, d: string) => String.fromCodePoint(Number(d)))
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&quot;', '"')
    .replaceAll('&apos;', "'")
    .replaceAll('&amp;', '&');
}

/** The test cases of a junit.xml report (the ginkgo suite's and the main-line suite's alike). */
function parseJUnit(xml: string): Case[] {
  const cases: Case[] = [];
  const re = /<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g;
  for (const m of xml.matchAll(re)) {
    const attrs = m[1] ?? '';
    const body = m[2] ?? '';
    const attr = (name: string) => {
      const a = new RegExp(`\\b${name}="([^"]*)"`).exec(attrs);
      return a?.[1] === undefined ? undefined : decode(a[1]);
    };
    const failure = /<(failure|error)\b([^>]*?)(?:\/>|>([\s\S]*?)<\/\1>)/.exec(body);
    let status = attr('status') ?? (failure ? 'failed' : /<skipped\b/.test(body) ? 'skipped' : 'passed');
    if (failure && status === 'passed') status = 'failed';
    const message = failure ? decode(/message="([^"]*)"/.exec(failure[2] ?? '')?.[1] ?? '') : undefined;
    const detail = failure ? decode(failure[3] ?? '').trim() : undefined;
    const output = decode(/<system-out>([\s\S]*?)<\/system-out>/.exec(body)?.[1] ?? '').trim();
    cases.push({ name: attr('name') ?? '?', status, failure: failure ? detail || message : undefined, output });
  }
  return cases;
}

export function versionOf(binary: string): string {
  const stamp = join(TOOLS, 'bin', `.${binary}.version`);
  return existsSync(stamp) ? readFileSync(stamp, 'utf8').trim() : 'unknown version';
}

/** Prints the summary; fails with each case that is not `ok` on a line of its own. */
function judge(suite: string, reportDir: string, code: number, cases: Case[], ok: (c: Case) => boolean): void {
  const failed = cases.filter((c) => !ok(c));
  const count = (s: string) => cases.filter((c) => c.status === s).length;
  const summary = `${suite}: passed ${count('passed')}, skipped ${count('skipped')}, not passing ${failed.length}; report in ${reportDir}`;
  console.log(summary);
  if (failed.length > 0 || code !== 0) {
    const lines = failed.map((c) => `- ${c.name} [${c.status}]\n    ${(c.failure ?? c.output).split('\n').slice(0, 6).join('\n    ')}`);
    throw new Error(`${summary}; exit ${code}\n${lines.join('\n')}`);
  }
}

function readReport(reportDir: string, res: { code: number; stdout: string; stderr: string }): Case[] {
  const junitPath = join(reportDir, 'junit.xml');
  if (!existsSync(junitPath)) {
    throw new Error(`the conformance suite wrote no report (exit ${res.code})\n--- stdout\n${res.stdout.slice(-8000)}\n--- stderr\n${res.stderr.slice(-4000)}`);
  }
  return parseJUnit(readFileSync(junitPath, 'utf8'));
}

export async function runV111(url: string, route: string, token: string): Promise<void> {
  const reportDir = tempDir('velodex-conformance-');
  const res = await run(tool('conformance'), ['-ginkgo.no-color'], {
    cwd: reportDir,
    allowFailure: true,
    timeoutMs: 600_000,
    env: {
      OCI_ROOT_URL: url.replace(/\/$/, ''),
      OCI_NAMESPACE: `${route}/conformance`,
      OCI_CROSSMOUNT_NAMESPACE: `${route}/other`,
      OCI_USERNAME: '__token__',
      OCI_PASSWORD: token,
      OCI_TEST_PULL: '1',
      OCI_TEST_PUSH: '1',
      OCI_TEST_CONTENT_DISCOVERY: '1',
      OCI_TEST_CONTENT_MANAGEMENT: '1',
      // velodex mounts a blob the target index holds even without `from`, so the automatic-crossmount spec applies.
      OCI_AUTOMATIC_CROSSMOUNT: '1',
      OCI_HIDE_SKIPPED_WORKFLOWS: '0',
      OCI_DEBUG: '0',
      OCI_REPORT_DIR: reportDir,
    },
  });
  const cases = readReport(reportDir, res);
  // Skipped specs are the ones this configuration turns off (the read-only setups, the
  // crossmount variants for registries that do not mount automatically); anything else that is
  // not a pass (failed, panicked, interrupted, timed out) fails the test.
  judge(`conformance ${versionOf('oci-conformance')}`, reportDir, res.code, cases, (c) => c.status === 'passed' || c.status === 'skipped' || c.status === 'pending');
  // The v1.1.1 suite has 79 specs; all but the four this configuration turns off must pass.
  expect(cases.filter((c) => c.status === 'passed').length).toBeGreaterThanOrEqual(75);
}

export async function runMain(url: string, route: string, token: string): Promise<void> {
  const reportDir = tempDir('velodex-conformance-main-');
  // Configured by the environment alone: the report directory holds no oci-conformance.yaml.
  const res = await run(tool('conformance-main'), [], {
    cwd: reportDir,
    allowFailure: true,
    timeoutMs: 600_000,
    env: {
      OCI_RESULTS_DIR: reportDir,
      OCI_VERSION: '1.1',
      OCI_LOG: 'warn',
      OCI_REGISTRY: url.replace(/^http:\/\//, '').replace(/\/$/, ''),
      OCI_TLS: 'disabled',
      OCI_REPO1: `${route}/main/repo1`,
      OCI_REPO2: `${route}/main/repo2`,
      OCI_USERNAME: '__token__',
      OCI_PASSWORD: token,
      OCI_API_PULL: 'true',
      OCI_API_PUSH: 'true',
      OCI_API_BLOBS_ATOMIC: 'true',
      OCI_API_BLOBS_DELETE: 'true',
      OCI_API_BLOBS_DIGEST_HEADER: 'true', // velodex always sends Docker-Content-Digest
      OCI_API_BLOBS_MOUNT_ANONYMOUS: 'true',
      OCI_API_BLOBS_UPLOAD_CANCEL: 'true',
      OCI_API_MANIFESTS_ATOMIC: 'true',
      OCI_API_MANIFESTS_DELETE: 'true',
      OCI_API_MANIFESTS_DIGEST_HEADER: 'true',
      OCI_API_MANIFESTS_TAG_PARAM: 'false', // not in the spec
      OCI_API_TAGS_ATOMIC: 'true',
      OCI_API_TAGS_DELETE: 'true',
      OCI_API_TAGS_LIST: 'true',
      OCI_API_REFERRER: 'true',
      // A sparse image (a layer never pushed) is refused with 400 MANIFEST_BLOB_UNKNOWN, as the
      // distribution registry does and the suite's default expects; api-manifests.test.ts
      // checks that, and that a sparse index (absent children) is accepted.
      OCI_DATA_SPARSE: 'false',
      OCI_DATA_SHA512: 'false', // sha256 only, by the spec
    },
  });
  const cases = readReport(reportDir, res);
  // The only skip the spec allows: the referrers API applies no artifactType filter.
  const filterSkip = (c: Case) => c.status === 'skipped' && /OCI-Filters-Applied/.test(c.output);
  judge(`conformance-main ${versionOf('oci-conformance-main')}`, reportDir, res.code, cases, (c) => c.status === 'passed' || filterSkip(c));
  // 583 with this configuration (sparse images off).
  expect(cases.filter((c) => c.status === 'passed').length).toBeGreaterThanOrEqual(580);
  // Every API and data row of the suite's summary passed (the summary sits on stdout).
  expect(res.stdout).toMatch(/OCI Conformance Result: Pass/);
  expect(res.stdout).not.toMatch(/:\s+FAIL$/m);
}
