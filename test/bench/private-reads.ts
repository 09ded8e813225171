/**
 * What a private index (`read = "token"`, docs/access.md) costs on warm reads: one velodex with an
 * open and a private cached Python index over the same upstream, and an open and a private hosted
 * OCI index holding the same image. The private ones are read as their clients read them: pip's
 * Basic credentials on every page request, docker's realm token on every manifest GET (its
 * binding checked per request); docker reads the open index with the realm's anonymous token. Open and private are measured in alternating rounds; the ratio of
 * their medians is the cost of the check.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cached, oci } from '../support/config.js';
import { measure, type Load, type Target } from './load.js';
import { startVelodexBench, type Server } from './servers.js';

export interface PrivateReadOptions {
  work: string;
  logs: string;
  token: string;
  /** The cached indexes' upstream (pypiserver's /simple/) and a project it serves. */
  upstreamSimple: string;
  project: string;
  /** Pushes the bench image to `name` on `server` (logged in with `token`); the manifest-by-tag target. */
  pushImage: (server: Server, name: string) => Promise<Target>;
  load: Load;
  rounds: number;
  progress: (m: string) => void;
}

const READ_TOKEN = 'bench-read-token-5e1d0c';

export async function measurePrivateReads(o: PrivateReadOptions): Promise<string> {
  const dataDir = join(o.work, 'private-reads');
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, 'upload-token'), `${o.token}\n`);
  const reader = [{ name: 'reader', secret: READ_TOKEN, scopes: ['read' as const] }];
  const velodex = await startVelodexBench(dataDir, 'warn', join(o.logs, 'velodex-private.log'), [
    cached('open-pypi', o.upstreamSimple, { route: 'open/pypi' }),
    cached('private-pypi', o.upstreamSimple, { route: 'private/pypi', read: 'token', tokens: reader }),
    oci.hosted('open-oci', { route: 'open/oci', token: { file: join(dataDir, 'upload-token') } }),
    oci.hosted('private-oci', { route: 'private/oci', token: { file: join(dataDir, 'upload-token') }, read: 'token', tokens: reader }),
  ]);
  try {
    const basic = `Basic ${Buffer.from(`__token__:${READ_TOKEN}`).toString('base64')}`;
    const openManifest = await o.pushImage(velodex, 'open/oci/bench/app');
    const privateManifest = await o.pushImage(velodex, 'private/oci/bench/app');
    // Docker reads either index with a realm token: the open one's anonymous, the private one's its reader's.
    const tokenFor = async (repo: string, headers: Record<string, string>) =>
      ((await (await fetch(`${velodex.url}/v2/token?service=velodex&scope=repository:${repo}:pull`, { headers })).json()) as { token: string }).token;
    const token = await tokenFor('private/oci/bench/app', { authorization: basic });
    const anonymousToken = await tokenFor('open/oci/bench/app', {});
    const targets: Record<'page' | 'manifest', { open: Target; private: Target & { headers: Record<string, string> } }> = {
      page: {
        open: { url: `${velodex.url}/open/pypi/simple/${o.project}/`, headers: { accept: 'text/html' } },
        private: { url: `${velodex.url}/private/pypi/simple/${o.project}/`, headers: { accept: 'text/html', authorization: basic } },
      },
      manifest: {
        open: { url: openManifest.url, headers: { ...(openManifest.headers ?? {}), authorization: `Bearer ${anonymousToken}` } },
        private: { url: privateManifest.url, headers: { ...(privateManifest.headers ?? {}), authorization: `Bearer ${token}` } },
      },
    };
    for (const [what, pair] of Object.entries(targets)) {
      for (const [kind, target] of Object.entries(pair)) {
        const res = await fetch(target.url, { headers: target.headers });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`${kind} ${what} ${target.url} answered ${res.status}`);
      }
      const { authorization: _sent, ...anonymousHeaders } = pair.private.headers;
      const anonymous = await fetch(pair.private.url, { headers: anonymousHeaders });
      await anonymous.arrayBuffer();
      if (anonymous.status !== 401) throw new Error(`the private ${what} answered ${anonymous.status} without credentials`);
    }
    const rows: string[] = [];
    for (const [what, pair] of Object.entries(targets)) {
      const open: number[] = [];
      const closed: number[] = [];
      for (let r = 0; r < o.rounds; r++) {
        o.progress(`private reads: ${what}, round ${r + 1}/${o.rounds}`);
        open.push((await measure(pair.open, o.load)).reqPerSec);
        closed.push((await measure(pair.private, o.load)).reqPerSec);
      }
      const [a, b] = [median(open), median(closed)];
      rows.push(`| ${what === 'page' ? 'cached Simple page (pip: Basic per request)' : 'manifest GET by tag (docker: realm token per request)'} | ${fmt(a)} | ${fmt(b)} | ${(b / a).toFixed(2)}x |`);
    }
    return [
      `### Private indexes: warm reads with the token checked per request (req/s, ${o.load.connections} connections, median of ${o.rounds} alternating rounds)`,
      '',
      '| read | open index | private index | private / open |',
      '|---|--:|--:|--:|',
      ...rows,
      '',
    ].join('\n');
  } finally {
    await velodex.stop();
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
