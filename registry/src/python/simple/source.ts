/**
 * Loads what the read side serves: project records from the store, turned into resolved
 * projects and rendered pages through the shared page cache. Every call reads the record's
 * current store version first, so the cache can never serve a page older than the store.
 */
import { createHash } from 'node:crypto';
import type { ProjectRecord, ProjectRecords } from '../records.js';
import { PageCache, type RenderedPage } from './page-cache.js';
import { resolveProject, type ResolvedProject } from './resolved.js';

export interface LoadedProject {
  record: ProjectRecord;
  /** Store version of the record. */
  version: string;
}

export class ProjectSource {
  constructor(
    readonly records: ProjectRecords,
    readonly pages = new PageCache(),
  ) {}

  async load(indexName: string, normalized: string): Promise<LoadedProject | null> {
    return this.records.get(indexName, normalized);
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
    const loaded = await this.load(indexName, normalized);
    if (!loaded) return null;
    const key = `${indexName}\n${normalized}\n${variant}`;
    // A renderer answers null for "not found inside the project" (an unknown version).
    return this.pages.obtain(key, loaded.version, () => render(resolveProject(normalized, loaded.record)));
  }

  /** The project-list page; its cache version is the list of names itself. */
  async listPage(indexName: string, variant: string, render: (names: string[]) => string): Promise<RenderedPage> {
    const names = await this.records.list(indexName);
    const version = createHash('sha256').update(names.join('\n')).digest('hex');
    // The renderer never answers null here, so neither does obtain.
    return this.pages.obtain(`${indexName}\n\n${variant}`, version, () => render(names))!;
  }
}
