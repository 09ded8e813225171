/**
 * oras against velodex's hosted OCI index: push an artifact made of files with an artifact type,
 * attach referrers (a signature-like and an SBOM-like artifact), discover them through the
 * referrers API, pull the files back, copy with referrers, delete.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pseudoRandom, sha256 } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { clientSuite } from './client-setup.js';

const c = clientSuite('oras', { env: (work) => ({ DOCKER_CONFIG: join(work, 'docker') }) });

interface Pushed {
  digest: string;
  mediaType: string;
  artifactType?: string;
}

interface Referrers {
  manifests?: { digest: string; artifactType?: string; mediaType: string; annotations?: Record<string, string> }[];
}

function oras(args: string[], cwd = c.work, allowFailure = false): Promise<RunResult> {
  // `oras cp` takes --from-plain-http/--to-plain-http instead.
  const plain = args[0] === 'cp' ? [] : ['--plain-http'];
  return run(tool('oras'), [...args, ...plain], { cwd, env: c.env, allowFailure, timeoutMs: 180_000 });
}

const auth = () => ['-u', '__token__', '-p', c.token];

/** A directory with the given files; returns its path. */
function files(name: string, content: Record<string, Buffer | string>): string {
  const dir = join(c.work, name);
  mkdirSync(dir, { recursive: true });
  for (const [path, bytes] of Object.entries(content)) writeFileSync(join(dir, path), bytes);
  return dir;
}

describe('oras', () => {
  const thingType = 'application/vnd.example.thing.v1';
  const signatureType = 'application/vnd.example.signature';
  const sbomType = 'application/vnd.example.sbom.v1+json';
  const readme = Buffer.from('# an artifact\n\npushed by the velodex oras suite\n');
  const data = pseudoRandom('oras-data', 300 * 1024);
  let subject: Pushed;
  let manifestBytes: Buffer;

  it('pushes an artifact of files with an artifact type', async () => {
    const dir = files('artifact', { 'readme.md': readme, 'data.bin': data });
    const ref = `${c.host}/root/oci/oras/thing:v1`;
    const res = await oras(
      ['push', ...auth(), '--artifact-type', thingType, '--annotation', 'org.example.origin=velodex-tests', '--export-manifest', 'manifest.json', '--format', 'json', ref, 'readme.md:text/markdown', 'data.bin:application/octet-stream'],
      dir,
    );
    subject = JSON.parse(res.stdout) as Pushed;
    manifestBytes = readFileSync(join(dir, 'manifest.json'));
    expect(subject.digest).toBe(sha256(manifestBytes));

    const fetched = await oras(['manifest', 'fetch', ref]);
    expect(Buffer.from(fetched.stdout).equals(manifestBytes)).toBe(true);
    const manifest = JSON.parse(fetched.stdout) as { artifactType?: string; layers: { digest: string; annotations?: Record<string, string> }[]; annotations?: Record<string, string> };
    expect(manifest.artifactType).toBe(thingType);
    expect(manifest.annotations?.['org.example.origin']).toBe('velodex-tests');
    expect(manifest.layers.map((l) => l.annotations?.['org.opencontainers.image.title']).sort()).toEqual(['data.bin', 'readme.md']);
    expect(manifest.layers.map((l) => l.digest).sort()).toEqual([sha256(data), sha256(readme)].sort());

    expect((await oras(['repo', 'tags', `${c.host}/root/oci/oras/thing`])).stdout.trim().split('\n')).toEqual(['v1']);
    expect((await oras(['resolve', ref])).stdout.trim()).toBe(subject.digest);
  });

  it('pulls the artifact back byte for byte', async () => {
    const out = join(c.work, 'pulled');
    await oras(['pull', '-o', out, `${c.host}/root/oci/oras/thing:v1`]);
    expect(readFileSync(join(out, 'readme.md')).equals(readme)).toBe(true);
    expect(readFileSync(join(out, 'data.bin')).equals(data)).toBe(true);

    const blob = await run('sh', ['-c', '"$0" blob fetch --plain-http --output - "$1" | sha256sum', tool('oras'), `${c.host}/root/oci/oras/thing@${sha256(data)}`], { env: c.env });
    expect(`sha256:${blob.stdout.split(' ')[0]}`).toBe(sha256(data));
  });

  let signature: Pushed;
  let sbom: Pushed;

  it('attaches referrers and discovers them', async () => {
    const ref = `${c.host}/root/oci/oras/thing:v1`;
    const dir = files('referrers', {
      'signature.sig': Buffer.from(`signed ${subject.digest}\n`),
      'sbom.json': JSON.stringify({ packages: [{ name: 'demo', version: '1.0' }] }),
    });
    signature = JSON.parse(
      (await oras(['attach', ...auth(), '--artifact-type', signatureType, '--annotation', 'org.example.signer=ci', '--format', 'json', ref, 'signature.sig:application/vnd.example.signature.v1'], dir)).stdout,
    ) as Pushed;
    sbom = JSON.parse((await oras(['attach', ...auth(), '--artifact-type', sbomType, '--format', 'json', ref, 'sbom.json:application/json'], dir)).stdout) as Pushed;
    expect(signature.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(sbom.digest).not.toBe(signature.digest);

    const all = JSON.parse((await oras(['discover', '--format', 'json', ref])).stdout) as Referrers;
    const listed = (all.manifests ?? []).map((m) => ({ digest: m.digest, artifactType: m.artifactType }));
    expect(listed).toEqual(
      expect.arrayContaining([
        { digest: signature.digest, artifactType: signatureType },
        { digest: sbom.digest, artifactType: sbomType },
      ]),
    );
    expect(listed).toHaveLength(2);
    const sigEntry = all.manifests?.find((m) => m.digest === signature.digest);
    expect(sigEntry?.annotations?.['org.example.signer']).toBe('ci');

    // Filtered by artifact type (by the server or, where it does not filter, by oras itself).
    const sigs = JSON.parse((await oras(['discover', '--format', 'json', '--artifact-type', signatureType, ref])).stdout) as Referrers;
    expect((sigs.manifests ?? []).map((m) => m.digest)).toEqual([signature.digest]);

    // The referrer is itself pullable by digest.
    const out = join(c.work, 'sig-pulled');
    await oras(['pull', '-o', out, `${c.host}/root/oci/oras/thing@${signature.digest}`]);
    expect(readFileSync(join(out, 'signature.sig'), 'utf8')).toBe(`signed ${subject.digest}\n`);
  });

  it('copies an artifact with its referrers to another repository', async () => {
    const from = `${c.host}/root/oci/oras/thing:v1`;
    const to = `${c.host}/root/oci/oras/copied/thing:v1`;
    await oras(['cp', '-r', '--from-plain-http', '--to-plain-http', '--to-username', '__token__', '--to-password', c.token, from, to]);
    expect((await oras(['resolve', to])).stdout.trim()).toBe(subject.digest);
    const refs = JSON.parse((await oras(['discover', '--format', 'json', to])).stdout) as Referrers;
    expect((refs.manifests ?? []).map((m) => m.digest).sort()).toEqual([signature.digest, sbom.digest].sort());
  });

  it('deletes a manifest by digest', async () => {
    const ref = `${c.host}/root/oci/oras/thing@${sbom.digest}`;
    await oras(['manifest', 'delete', '--force', ...auth(), ref]);
    const gone = await oras(['manifest', 'fetch', ref], c.work, true);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr).toMatch(/not found|MANIFEST_UNKNOWN|404/i);
  });

  it('refuses a push with a wrong token', async () => {
    const dir = files('denied', { 'x.txt': 'x\n' });
    const res = await oras(['push', '-u', '__token__', '-p', 'wrong', `${c.host}/root/oci/oras/denied:v1`, 'x.txt'], dir, true);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/401|unauthorized/i);
  });
});
