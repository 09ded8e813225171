/** The project source of a hosted index: its project records and the blobs they name. */
import { REQUEST_READ, type BlobStore } from '../../../storage/types.js';
import { candidateProjects } from '../source/lookup.js';
import type { FileRecord, ProjectRecords } from '../../model/records.js';
import { resolveFile, resolveProject } from '../../model/resolved.js';
import type { FileBody, FilePart, IndexSource, ListedFile, NameList, ProjectView } from '../source/types.js';

export class HostedSource implements IndexSource {
  constructor(
    readonly indexName: string,
    readonly records: ProjectRecords,
    readonly blobs: BlobStore,
  ) {}

  async project(normalized: string): Promise<ProjectView | null> {
    const loaded = await this.records.get(this.indexName, normalized, REQUEST_READ);
    if (!loaded) return null;
    return { version: loaded.version, hosted: true, resolve: async () => resolveProject(normalized, loaded.record) };
  }

  async names(): Promise<NameList> {
    // One document read (the index's names document), never a listing of the records.
    const { names, version } = await this.records.names(this.indexName, REQUEST_READ);
    return { names, version: `names:${version}` };
  }

  async locate(sha256: string, filename: string): Promise<ListedFile | null> {
    for (const project of candidateProjects(filename)) {
      const loaded = await this.records.get(this.indexName, project, REQUEST_READ);
      const rec = loaded?.record.files[filename];
      if (!rec) continue;
      if (rec.sha256 !== sha256) return null;
      return { project, file: resolveFile(rec), open: (part) => this.#open(rec, part) };
    }
    return null;
  }

  async #open(rec: FileRecord, part: FilePart): Promise<FileBody | null> {
    // Uploads carry no signatures (twine stopped sending them; PyPI stopped taking them).
    if (part === 'signature') return null;
    // The artifact's size is in its record, and its bytes, content-addressed, are the record's:
    // the download opens them without asking the store first.
    if (part === 'file') return { kind: 'blob', digest: rec.sha256, size: rec.size, unconfirmed: true };
    const digest = rec.metadataSha256;
    if (!digest) return null;
    const info = await this.blobs.stat(digest);
    return info ? { kind: 'blob', digest, size: info.size } : null;
  }
}
