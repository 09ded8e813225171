/**
 * Sizes of a cached index's files that its upstream page does not give (PEP 503 HTML carries
 * none), learnt when velodex stores a file or the upstream announces its length on a fetch. One
 * document per project, by sha256 (a size belongs to the bytes). Its store version joins the
 * page-cache tag, so a page rendered before a size was learnt is rendered again, with `size` in
 * PEP 691 JSON and legacy JSON and `max-file-size` applied to the page.
 */
import { updateDoc } from '../../../storage/update.js';
import type { MetaStore, ReadOptions } from '../../../storage/types.js';
import type { ResolvedProject } from '../../model/resolved.js';
import { mapResolvedFiles } from '../../model/transform.js';

interface SizesDoc {
  sizes: Record<string, number>;
}

export interface LoadedSizes {
  sizes: Readonly<Record<string, number>>;
  version: string;
}

export class KnownSizes {
  constructor(
    readonly meta: MetaStore,
    readonly indexName: string,
  ) {}

  #key(project: string): string {
    return `python/${this.indexName}/cache/sizes/${project}`;
  }

  async get(project: string, opts?: ReadOptions): Promise<LoadedSizes | null> {
    const got = await this.meta.get<SizesDoc>(this.#key(project), opts);
    return got ? { sizes: got.doc.sizes, version: got.version } : null;
  }

  /** Records a size; a size already known is left alone (no write). */
  async learn(project: string, sha256: string, size: number): Promise<void> {
    await updateDoc<SizesDoc>(this.meta, this.#key(project), (doc) => {
      if (doc?.sizes[sha256] === size) return undefined;
      return { sizes: { ...doc?.sizes, [sha256]: size } };
    });
  }
}

/** The page-cache tag of a page that depends on learnt sizes too. */
export function withSizesVersion(version: string, sizes: LoadedSizes | null): string {
  return sizes ? `${version}+sizes:${sizes.version}` : version;
}

/** The project with every learnt size filled in where the upstream gave none. */
export function withKnownSizes(project: ResolvedProject, sizes: LoadedSizes | null): ResolvedProject {
  if (!sizes) return project;
  return mapResolvedFiles(project, (f) => {
    const size = f.size === null ? sizes.sizes[f.sha256] : undefined;
    return size === undefined ? f : { ...f, size };
  });
}
