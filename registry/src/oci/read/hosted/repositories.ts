/**
 * Which repositories a hosted index holds, from the keys of its metadata documents: a repository
 * exists while it records at least one manifest (`<repo path>/_manifests/<hex>`, model/meta.ts).
 * Repository components never start with "_", so the first "_" segment ends the path.
 */
import type { IndexConfig } from '../../../config/types.js';
import type { MetaStore } from '../../../storage/types.js';
import { reposFolder } from '../../model/meta.js';

export async function repositoriesIn(meta: MetaStore, index: IndexConfig): Promise<string[][]> {
  const folder = reposFolder(index);
  const byPath = new Map<string, string[]>();
  for await (const key of meta.list(folder)) {
    const segments = key.slice(folder.length + 1).split('/');
    const cut = segments.findIndex((s) => s.startsWith('_'));
    if (cut <= 0 || segments[cut] !== '_manifests' || cut !== segments.length - 2) continue;
    const repo = segments.slice(0, cut);
    byPath.set(repo.join('/'), repo);
  }
  return [...byPath.values()];
}
