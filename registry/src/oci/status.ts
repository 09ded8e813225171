/**
 * What the OCI ecosystem contributes to `/+status` and `/+stats`, and how its writes keep the
 * per-index summary current (observe/summary.ts). For counting, a repository is the project, a
 * blob (by digest) the file, a manifest GET/HEAD a page, and a manifest push the upload: the one
 * write that makes an image (or artifact) pullable; blob pushes before it are its parts. The
 * summary counts manifests per repository, read back from the repository's digest set after each
 * manifest write (one document read, no listing).
 */
import type { IndexConfig } from '../config/types.js';
import type { Ecosystem } from '../ecosystem/ecosystem.js';
import type { IndexDescription } from '../observe/describe.js';
import type { UpstreamList } from '../roles/upstream-list.js';
import type { IndexSummaries, RecentUpload, ScannedSummary } from '../observe/summary.js';
import type { MetaStore } from '../storage/types.js';
import type { ManifestRecord, TagsDoc } from './model/meta.js';
import { reposFolder } from './model/meta.js';
import type { HostedRepos } from './read/hosted/repos.js';
import type { Members } from './read/virtual/members.js';

type Log = { warn(obj: object, msg: string): void };

const MANIFEST_KEY = /^(.+)\/_manifests\/([0-9a-f]{64})$/;

export function ociStatus(meta: MetaStore, members: Members): Pick<Ecosystem, 'describe' | 'scanIndex'> {
  return {
    describe: (index) => ({
      terms: { project: 'repository', file: 'manifest' },
      ...(index.role === 'cached' ? upstreamsOf(members.cached(index).upstream.list) : {}),
    }),
    scanIndex: (index) => scanOciIndex(meta, index),
  };
}

function upstreamsOf(list: UpstreamList<unknown>): Pick<IndexDescription, 'upstreamOffline' | 'upstreams'> {
  return { upstreamOffline: list.offline, upstreams: list.reports() };
}

/**
 * One pass over the index's repository documents: manifests per repository, and every push (a
 * manifest record's time, with a tag that points at it, if any) for the recent list.
 */
async function scanOciIndex(meta: MetaStore, index: IndexConfig): Promise<ScannedSummary> {
  const folder = reposFolder(index);
  const projects: Record<string, number> = {};
  const recent: RecentUpload[] = [];
  const tagsOf = new Map<string, Promise<Map<string, string>>>();
  const tagOf = async (repo: string, hex: string): Promise<string | undefined> => {
    let tags = tagsOf.get(repo);
    if (!tags) {
      tags = meta.get<TagsDoc>(`${folder}/${repo}/_tags`).then((d) => new Map(Object.entries(d?.doc.tags ?? {}).map(([tag, h]) => [h, tag])));
      tagsOf.set(repo, tags);
    }
    return (await tags).get(hex);
  };
  for await (const key of meta.list(folder)) {
    const m = MANIFEST_KEY.exec(key.slice(folder.length + 1));
    if (!m) continue;
    const repo = m[1]!;
    const hex = m[2]!;
    projects[repo] = (projects[repo] ?? 0) + 1;
    const record = (await meta.get<ManifestRecord>(key))?.doc;
    if (!record) continue;
    const tag = await tagOf(repo, hex);
    recent.push({ time: record.pushedAt, index: index.name, project: repo, ...(tag !== undefined ? { version: tag } : {}), filename: `sha256:${hex}`, ...(record.pushedBy ? { by: record.pushedBy } : {}) });
  }
  return { projects, recent };
}

/** Records one committed manifest push or delete of `hosted`'s repository `repo`. */
export async function recordManifestWrite(
  summaries: IndexSummaries,
  hosted: HostedRepos,
  repo: readonly string[],
  log: Log,
  pushed?: { hex: string; tag?: string; time: string; by?: string },
): Promise<void> {
  const name = repo.join('/');
  const index = hosted.index.name;
  let manifests: number;
  try {
    manifests = await hosted.manifestCount(repo);
  } catch (err) {
    log.warn({ index, repository: name, err: err instanceof Error ? err.message : String(err) }, 'status summary: manifests not counted');
    await summaries.recordAfterCommit(index, {}, log);
    return;
  }
  const uploads: RecentUpload[] = pushed
    ? [{ time: pushed.time, index, project: name, ...(pushed.tag !== undefined ? { version: pushed.tag } : {}), filename: `sha256:${pushed.hex}`, ...(pushed.by ? { by: pushed.by } : {}) }]
    : [];
  await summaries.recordAfterCommit(index, { projects: { [name]: manifests }, uploads }, log);
}
