/**
 * The per-project and per-file usage counters of one index (the drill-down of `/+stats`).
 *
 * Memory is bounded: at most `maxProjects` projects per index and `maxFiles` files per project
 * are tracked. Both maps are kept in least-recently-counted order (a counted entry moves to the
 * end: one Map delete and set), and when a new entry would pass the cap the least recently
 * counted one is evicted and its counts are folded into `evicted`, so the projects and files
 * shown plus `evicted` still add up to the totals. On the request path a count is a map lookup
 * and additions on preallocated records; a new entry is allocated once per project or file.
 * Worst case, every project full: 100,000 file entries, about 15 MB per index.
 */
import type { CounterValues, UsageCounter } from './counters.js';

export const MAX_PROJECTS = 1000;
export const MAX_FILES_PER_PROJECT = 100;

/** What is counted per file: the three counters a file has. */
export interface FileCounterValues {
  downloads: number;
  metadata: number;
  bytes: number;
}

const FILE_COUNTERS = ['downloads', 'metadata', 'bytes'] as const;

/** One process's project counters as plain data (`dump`, `absorb`). */
export interface ProjectCountersDump {
  evicted: CounterValues;
  projects: Array<{ name: string; values: CounterValues; files: Array<[string, FileCounterValues]>; evictedFiles: FileCounterValues }>;
}

function fileCounted(name: UsageCounter): name is keyof FileCounterValues {
  return name === 'downloads' || name === 'metadata' || name === 'bytes';
}

export class ProjectEntry {
  readonly files = new Map<string, FileCounterValues>();
  readonly evictedFiles: FileCounterValues = { downloads: 0, metadata: 0, bytes: 0 };

  constructor(
    readonly values: CounterValues,
    readonly maxFiles: number,
  ) {}

  addFile(file: string, name: keyof FileCounterValues, n: number): void {
    let f = this.files.get(file);
    if (f) {
      this.files.delete(file);
    } else {
      f = { downloads: 0, metadata: 0, bytes: 0 };
      if (this.files.size >= this.maxFiles) this.#evictOldestFile();
    }
    this.files.set(file, f);
    f[name] += n;
  }

  #evictOldestFile(): void {
    const [oldest, values] = this.files.entries().next().value!;
    this.files.delete(oldest);
    this.evictedFiles.downloads += values.downloads;
    this.evictedFiles.metadata += values.metadata;
    this.evictedFiles.bytes += values.bytes;
  }
}

export class ProjectCounters {
  readonly #projects = new Map<string, ProjectEntry>();
  /** Counts of projects evicted to stay under the cap. */
  readonly evicted: CounterValues;

  constructor(
    readonly fresh: () => CounterValues,
    readonly maxProjects = MAX_PROJECTS,
    readonly maxFiles = MAX_FILES_PER_PROJECT,
  ) {
    this.evicted = fresh();
  }

  add(project: string, name: UsageCounter, n: number, file?: string): void {
    let entry = this.#projects.get(project);
    if (entry) {
      this.#projects.delete(project);
    } else {
      entry = new ProjectEntry(this.fresh(), this.maxFiles);
      if (this.#projects.size >= this.maxProjects) this.#evictOldest();
    }
    this.#projects.set(project, entry);
    entry.values[name] += n;
    if (file !== undefined && fileCounted(name)) entry.addFile(file, name, n);
  }

  get(project: string): ProjectEntry | undefined {
    return this.#projects.get(project);
  }

  get size(): number {
    return this.#projects.size;
  }

  /** Every tracked project, least recently counted first. */
  entries(): IterableIterator<[string, ProjectEntry]> {
    return this.#projects.entries();
  }

  /** Every count, as plain data another process can `absorb`. */
  dump(): ProjectCountersDump {
    return {
      evicted: { ...this.evicted },
      projects: [...this.#projects].map(([name, e]) => ({ name, values: { ...e.values }, files: [...e.files].map(([f, v]) => [f, { ...v }]), evictedFiles: { ...e.evictedFiles } })),
    };
  }

  /** Adds another process's counts to these (the caps hold: what does not fit is evicted as usual). */
  absorb(dump: ProjectCountersDump): void {
    for (const key of Object.keys(dump.evicted) as UsageCounter[]) this.evicted[key] += dump.evicted[key];
    for (const p of dump.projects) {
      for (const key of Object.keys(p.values) as UsageCounter[]) if (p.values[key] !== 0) this.add(p.name, key, p.values[key]);
      const entry = this.#projects.get(p.name);
      if (!entry) continue;
      for (const [file, v] of p.files) {
        for (const key of FILE_COUNTERS) if (v[key] !== 0) entry.addFile(file, key, v[key]);
      }
      for (const key of FILE_COUNTERS) entry.evictedFiles[key] += p.evictedFiles[key];
    }
  }

  #evictOldest(): void {
    const [oldest, entry] = this.#projects.entries().next().value!;
    this.#projects.delete(oldest);
    for (const key of Object.keys(entry.values) as UsageCounter[]) this.evicted[key] += entry.values[key];
  }
}
