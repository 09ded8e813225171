/**
 * What the read side serves, for every role: each index's project source (hosted records, a
 * cached upstream, a virtual merge; see `read/source/types.ts`) turned into resolved projects and
 * rendered pages through the shared page cache. Every call asks the source for the project's
 * current version first, so the cache never serves a page older than what it was rendered from.
 */
import type { ProjectRecord, ProjectRecords } from '../model/records.js';
import { HttpError } from '../../http/errors.js';
import { NO_COUNTERS, type CounterSink, type UsageCounter } from '../../observe/counters.js';
import type { IndexSource, SourceLookup } from '../read/source/types.js';
import { PageCache, type RenderedPage } from './page-cache.js';
import type { ResolvedProject } from '../model/resolved.js';

export interface LoadedProject {
  record: ProjectRecord;
  /** Store version of the record. */
  version: string;
}

export class ProjectSource {
  constructor(
    readonly records: ProjectRecords,
    /** The source of every Python index, by name. */
    readonly sources: SourceLookup,
    readonly pages = new PageCache(),
    /** The usage counters of an index, by name. */
    readonly countersFor: (indexName: string) => CounterSink = () => NO_COUNTERS,
  ) {}

  /** Adds to a usage counter of an index (`/+stats`), and of the project and file when given. */
  count(indexName: string, name: UsageCounter, n = 1, project?: string, file?: string): void {
    if (n > 0) this.countersFor(indexName).add(name, n, project, file);
  }

  /** A hosted index's own record of a project (write paths and hosted-only tools use this). */
  async load(indexName: string, normalized: string): Promise<LoadedProject | null> {
    return this.records.get(indexName, normalized);
  }

  /** The project source of an index. */
  sourceFor(indexName: string): IndexSource {
    const found = this.sources(indexName);
    if (!found) throw new HttpError(404, `no Python index named ${indexName}`);
    return found;
  }

  /**
   * One page of a project, rendered from its resolved form; `variant` names the renderer and
   * anything else the bytes depend on. Null when the project does not exist.
   */
  async projectPage(
    indexName: string,
    normalized: string,
    variant: string,
    render: (project: ResolvedProject) => string | null,
  ): Promise<RenderedPage | null> {
    const view = await this.sourceFor(indexName).project(normalized);
    if (!view) return null;
    const key = `${indexName}\n${normalized}\n${variant}`;
    const hit = this.pages.peek(key, view.version);
    if (hit) {
      this.count(indexName, 'pages', 1, normalized);
      return hit;
    }
    const resolved = await view.resolve();
    // A renderer answers null for "not found inside the project" (an unknown version).
    const page = this.pages.obtain(key, view.version, () => render(resolved));
    if (page) this.count(indexName, 'pages', 1, normalized);
    return page;
  }

  /** The project-list page. */
  async listPage(indexName: string, variant: string, render: (names: string[]) => string): Promise<RenderedPage> {
    const list = await this.sourceFor(indexName).names();
    this.count(indexName, 'pages');
    // The renderer never answers null here, so neither does obtain.
    return this.pages.obtain(`${indexName}\n\n${variant}`, list.version, () => render(list.names))!;
  }
}
