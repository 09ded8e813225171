/**
 * Retention of the hosted OCI indexes that have rules (`untagged_after`, `keep_tags`): for each
 * repository, its tags and manifest records are read, the plan is computed
 * (model/retention-plan.ts), and, unless it is a dry run, applied through the very path a
 * client's DELETE takes (handlers/removal.ts): the same holds released, referrer lists,
 * catalog, status summary and webhook events.
 *
 * Pushes go on while a run works, so it re-checks before it changes anything: a tag is removed
 * only while it still names the manifest the plan saw (else skipped); after the tags, the
 * repository's manifest set is read again, and when a push added one since, the plan is made
 * again from fresh records (a new index may name an untagged manifest); and each manifest is
 * deleted only when no tag names it at that moment. What remains is the window a client's DELETE
 * has too: an index pushed in the instant between that last check and the delete, naming the
 * manifest being deleted (its push does not require its children to exist).
 */
import type { FastifyBaseLogger } from 'fastify';
import type { HostedIndex, IndexConfig, RetentionRules } from '../../config/types.js';
import type { DeleteEntry, IndexRetention, RepositoryRetention, RetentionSource, SkipEntry, UntagEntry } from '../../lifecycle/retention.js';
import { removeManifest, removeTag, type RemovalOrigin, type RemovalServices } from '../handlers/removal.js';
import { DOCKER_MANIFEST, OCI_MANIFEST, referencedHexesOf } from '../model/manifest-check.js';
import type { ManifestRecord } from '../model/meta.js';
import { planRepository, type ManifestState, type RepoPlan, type RepoState } from '../model/retention-plan.js';
import type { BlobBytes } from '../read/blob-bytes.js';
import type { HostedRepos } from '../read/hosted/repos.js';

/** Records (and index bytes) read at once. */
const AT_ONCE = 8;
/** Image manifests name blobs only, never another manifest: their bytes need not be read. */
const IMAGE_MANIFESTS = new Set([OCI_MANIFEST, DOCKER_MANIFEST]);

type Retained = HostedIndex & { retention: RetentionRules };

export class OciRetention implements RetentionSource {
  readonly #indexes: Retained[];

  constructor(
    indexes: readonly IndexConfig[],
    private readonly removal: RemovalServices,
    private readonly blobBytes: BlobBytes,
    private readonly log: FastifyBaseLogger,
  ) {
    this.#indexes = indexes.filter((ix): ix is Retained => ix.ecosystem === 'oci' && ix.role === 'hosted' && ix.retention !== undefined);
  }

  get active(): boolean {
    return this.#indexes.length > 0;
  }

  async run({ dryRun, now }: { dryRun: boolean; now: Date }): Promise<IndexRetention[]> {
    const out: IndexRetention[] = [];
    for (const index of this.#indexes) {
      const repos = this.removal.members.hosted(index);
      const repositories: RepositoryRetention[] = [];
      const names = (await repos.repositories()).sort((a, b) => (a.join('/') < b.join('/') ? -1 : 1));
      for (const repo of names) {
        const done = dryRun ? await this.#plan(repos, repo, index.retention, now) : await this.#apply(index, repos, repo, now);
        if (done.untagged.length + done.deleted.length + (done.skipped?.length ?? 0) > 0) repositories.push(done);
      }
      out.push({ index: index.name, repositories });
    }
    return out;
  }

  /** The dry run of one repository: the plan, as the report lists it. */
  async #plan(repos: HostedRepos, repo: string[], rules: RetentionRules, now: Date): Promise<RepositoryRetention> {
    const plan = planRepository(await readState(repos, repo, this.blobBytes), rules, now.getTime());
    return {
      repository: repo.join('/'),
      untagged: plan.untag.map((u) => ({ tag: u.tag, digest: `sha256:${u.hex}`, rule: u.rule })),
      deleted: plan.delete.map((d) => ({ digest: `sha256:${d.hex}`, tags: d.tags, ageSecs: d.ageSecs, rule: d.rule })),
    };
  }

  /** The real run of one repository: plan, untag, plan again if a push came in, delete. */
  async #apply(index: Retained, repos: HostedRepos, repo: string[], now: Date): Promise<RepositoryRetention> {
    const origin: RemovalOrigin = { via: index, log: this.log };
    const untagged: UntagEntry[] = [];
    const deleted: DeleteEntry[] = [];
    const skipped: SkipEntry[] = [];
    const removedFrom = new Map<string, string[]>();

    const untag = async (plan: RepoPlan) => {
      for (const hex of plan.firstSeen) await repos.markFirstSeen(repo, hex, now);
      for (const u of plan.untag) {
        const named = await removeTag(this.removal, index, repo, u.tag, origin, u.hex);
        if (named === undefined) {
          skipped.push({ digest: `sha256:${u.hex}`, tag: u.tag, reason: 'the tag is gone or names another manifest since the plan' });
          continue;
        }
        untagged.push({ tag: u.tag, digest: `sha256:${u.hex}`, rule: u.rule });
        removedFrom.set(u.hex, [...(removedFrom.get(u.hex) ?? []), u.tag]);
      }
    };

    let state = await readState(repos, repo, this.blobBytes);
    let plan = planRepository(state, index.retention, now.getTime());
    await untag(plan);
    const seen = new Set(state.manifests.map((m) => m.hex));
    if ((await repos.manifestDigests(repo)).some((hex) => !seen.has(hex))) {
      state = await readState(repos, repo, this.blobBytes);
      plan = planRepository(state, index.retention, now.getTime());
      await untag(plan);
    }

    for (const d of plan.delete) {
      const digest = `sha256:${d.hex}`;
      const tagged = Object.values((await repos.tagsDoc(repo)).tags).includes(d.hex);
      if (tagged) {
        skipped.push({ digest, reason: 'tagged again since the plan' });
        continue;
      }
      if (!(await removeManifest(this.removal, index, repo, d.hex, origin))) {
        skipped.push({ digest, reason: 'already deleted' });
        continue;
      }
      deleted.push({ digest, tags: (removedFrom.get(d.hex) ?? d.tags).sort(), ageSecs: d.ageSecs, rule: d.rule });
    }
    const name = repo.join('/');
    if (untagged.length + deleted.length + skipped.length > 0) {
      this.log.info(
        { event: 'retention', index: index.name, repository: name, untagged: untagged.map((u) => u.tag), deleted: deleted.map((d) => d.digest), skipped: skipped.length },
        'retention: repository changed',
      );
    }
    return { repository: name, untagged, deleted, ...(skipped.length > 0 ? { skipped } : {}) };
  }
}

/** What the plan needs of one repository: its tags (with their times) and its manifest records. */
async function readState(repos: HostedRepos, repo: readonly string[], blobBytes: BlobBytes): Promise<RepoState> {
  const [tagsDoc, hexes] = await Promise.all([repos.tagsDoc(repo), repos.manifestDigests(repo)]);
  const tags = Object.entries(tagsDoc.tags).map(([tag, hex]) => {
    const at = timeOf(tagsDoc.taggedAt && Object.hasOwn(tagsDoc.taggedAt, tag) ? tagsDoc.taggedAt[tag] : undefined);
    return { tag, hex, ...(at !== undefined ? { taggedAt: at } : {}) };
  });
  const manifests: ManifestState[] = [];
  for (let i = 0; i < hexes.length; i += AT_ONCE) {
    const batch = await Promise.all(hexes.slice(i, i + AT_ONCE).map((hex) => manifestState(repos, repo, hex, blobBytes)));
    for (const m of batch) if (m) manifests.push(m);
  }
  return { tags, manifests };
}

async function manifestState(repos: HostedRepos, repo: readonly string[], hex: string, blobBytes: BlobBytes): Promise<ManifestState | null> {
  // The digest set may still list a manifest just deleted: no record, nothing to plan.
  const record: Partial<ManifestRecord> | null = await repos.manifest(repo, hex);
  if (!record) return null;
  const since = timeOf(record.pushedAt) ?? timeOf(record.firstSeenAt);
  const bytes = record.mediaType !== undefined && IMAGE_MANIFESTS.has(record.mediaType) ? null : await blobBytes.get(hex);
  return {
    hex,
    names: bytes ? referencedHexesOf(bytes) : [],
    ...(since !== undefined ? { since } : {}),
    ...(record.subject !== undefined ? { subject: record.subject } : {}),
  };
}

/** Epoch ms of an ISO time, or undefined when absent or unreadable. */
function timeOf(iso: string | undefined): number | undefined {
  if (iso === undefined) return undefined;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? undefined : ms;
}
