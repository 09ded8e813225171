/**
 * The project source of a virtual index: its members, in order, merged.
 *
 * Dependency-confusion defence: when any member that is not an upstream cache (a hosted index,
 * or a nested virtual whose answer includes a hosted index) has a project, the upstream members
 * are not consulted for it at all, and their same-named project is hidden entirely. Private
 * members are asked first, so a private name is never even looked up upstream.
 */
import { createHash } from 'node:crypto';
import type { IndexConfig } from '../../../config/types.js';
import { isUpstream, shadowedAnswers } from '../../../roles/shadowing.js';
import { REQUEST_READ } from '../../../storage/types.js';
import { candidateProjects } from '../source/lookup.js';
import { applyOverrides, withOverridesVersion, type ProjectOverrides } from '../../model/overrides.js';
import type { ResolvedProject } from '../../model/resolved.js';
import type { IndexSource, ListedFile, NameList, ProjectView, StartedReads } from '../source/types.js';
import { MAX_LIST_NAMES } from '../cached/upstream-list.js';
import { mergeProjects } from './merge.js';

export interface Member {
  index: IndexConfig;
  source: IndexSource;
}

interface Contribution {
  member: Member;
  view: ProjectView;
}

export class VirtualSource implements IndexSource {
  constructor(
    readonly index: IndexConfig,
    /** Resolved lazily: members may be declared after the virtual index. */
    readonly members: () => Member[],
    readonly overrides: ProjectOverrides,
  ) {}

  /**
   * The route's own overrides are read alongside its members' views, not after them, and the
   * upstream members' store reads start with the private members' (`startReads`: no upstream is
   * asked before shadowing allows it), so a warm page is one round trip to the store.
   */
  async project(normalized: string): Promise<ProjectView | null> {
    // By member name: `members()` builds its entries afresh on every call.
    const started = new Map<string, StartedReads>();
    for (const m of this.members()) {
      const reads = isUpstream(m.index) ? m.source.startReads?.(normalized) : undefined;
      if (reads) started.set(m.index.name, reads);
    }
    const [parts, overrides] = await Promise.all([this.#contributions(normalized, started), this.overrides.get(this.index.name, normalized, REQUEST_READ)]);
    if (parts.length === 0) return null;
    const version = hash(parts.map((p) => `${p.member.index.name}=${p.view.version}`).join('\n'));
    return {
      version: withOverridesVersion(version, overrides),
      hosted: parts.some((p) => p.view.hosted),
      resolve: async () => applyOverrides(await this.#merge(normalized, parts), overrides?.doc),
    };
  }

  /**
   * The project's upstream-cached files as this route serves them before its own overrides, or
   * null when no upstream member has it or a private member shadows it (for mutations).
   */
  async upstreamProject(normalized: string): Promise<ResolvedProject | null> {
    const parts = await this.#contributions(normalized);
    if (parts.length === 0 || parts.some((p) => p.view.hosted)) return null;
    return this.#merge(normalized, parts);
  }

  async names(): Promise<NameList> {
    const lists = await Promise.allSettled(this.members().map((m) => m.source.names()));
    const names = new Set<string>();
    const versions: string[] = [];
    for (const [i, r] of lists.entries()) {
      // A member whose upstream is down with nothing cached leaves its names out, not the list.
      if (r.status === 'rejected') {
        versions.push(`${i}:unavailable`);
        continue;
      }
      versions.push(`${i}:${r.value.version}`);
      for (const n of r.value.names) {
        if (names.size >= MAX_LIST_NAMES) break;
        names.add(n);
      }
    }
    return { names: [...names].sort(), version: hash(versions.join('\n')) };
  }

  async locate(sha256: string, filename: string): Promise<ListedFile | null> {
    for (const project of candidateProjects(filename)) {
      const parts = await this.#contributions(project);
      if (parts.length === 0) continue;
      const overrides = await this.overrides.get(this.index.name, project, REQUEST_READ);
      if (overrides?.doc.files[filename]?.hidden) return null;
      // The first member that lists the filename owns it.
      for (const part of parts) {
        const resolved = await part.view.resolve();
        const file = resolved.files.find((f) => f.filename === filename);
        if (!file) continue;
        if (file.sha256 !== sha256) return null;
        return part.member.source.locate(sha256, filename);
      }
    }
    return null;
  }

  async #merge(normalized: string, parts: readonly Contribution[]): Promise<ResolvedProject> {
    return mergeProjects(normalized, await Promise.all(parts.map((p) => p.view.resolve())));
  }

  /** The members that contribute to `normalized`, in order, after shadowing (`roles/shadowing.ts`). */
  async #contributions(normalized: string, started?: ReadonlyMap<string, StartedReads>): Promise<Contribution[]> {
    return shadowedAnswers(
      this.members(),
      (m) => m.index,
      (group) => views(group, normalized, started),
      (p) => p.member,
      (p) => p.view.hosted,
    );
  }
}

/**
 * Every member's view of a project. A failing member is left out while another answers; when
 * all that were asked fail, the first failure is the answer (a 502 with the upstream's reason).
 */
async function views(members: readonly Member[], normalized: string, started?: ReadonlyMap<string, StartedReads>): Promise<Contribution[]> {
  const settled = await Promise.allSettled(members.map((m) => m.source.project(normalized, started?.get(m.index.name))));
  const parts: Contribution[] = [];
  let failure: unknown;
  let failed = false;
  for (const [i, r] of settled.entries()) {
    if (r.status === 'rejected') {
      if (!failed) failure = r.reason;
      failed = true;
    } else if (r.value) parts.push({ member: members[i]!, view: r.value });
  }
  if (failed && parts.length === 0) throw failure;
  return parts;
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
