/**
 * `[index.policy]` evaluation, ecosystem-neutral: an ecosystem hands in normalized project names
 * and file facts and gets back a denial object or null. Several policies (an index and its upload
 * target, say) combine into the strictest of them.
 */
import type { PolicyConfig } from '../config/types.js';
import type { PolicyAction, PolicyDenial } from './denial.js';
import { formatDuration } from '../config/duration.js';
import { compileGlob, type Glob } from './glob.js';

/** What a file-level rule looks at. */
export interface FileFacts {
  filename: string;
  version: string;
  /** Null when unknown (an upstream page that does not say): `max-file-size` cannot apply then. */
  size: number | null;
  /** ISO 8601, when the file was uploaded (hosted) or published upstream (cached); null when unknown. */
  uploadTime?: string | null;
}

interface NamedGlob {
  glob: string;
  re: Glob;
}

export class Policy {
  readonly #deny: NamedGlob[];
  /** Every list must match (one list per combined policy that has one). */
  readonly #allow: NamedGlob[][];
  readonly maxFileSize: number | undefined;
  readonly minReleaseAgeSecs: number | undefined;

  /** `normalize` is the ecosystem's name normalisation, applied to the patterns too. */
  constructor(configs: readonly PolicyConfig[], normalize: (name: string) => string = (n) => n) {
    const compile = (glob: string): NamedGlob => ({ glob, re: compileGlob(normalize(glob)) });
    this.#deny = configs.flatMap((c) => c.denyProjects.map(compile));
    this.#allow = configs.filter((c) => c.allowProjects.length > 0).map((c) => c.allowProjects.map(compile));
    this.maxFileSize = strictest(configs.map((c) => c.maxFileSize), Math.min);
    this.minReleaseAgeSecs = strictest(configs.map((c) => c.minReleaseAgeSecs), Math.max);
  }

  /** No rule at all: callers may skip work. */
  get empty(): boolean {
    return this.#deny.length === 0 && this.#allow.length === 0 && this.maxFileSize === undefined && this.minReleaseAgeSecs === undefined;
  }

  /** Whether the project-level rules let `project` (normalized) through. */
  allowsProject(project: string): boolean {
    return this.projectDenial('serve', project) === null;
  }

  projectDenial(action: PolicyAction, project: string): PolicyDenial | null {
    const denied = this.#deny.find((g) => g.re.test(project));
    if (denied) {
      return { action, project, rule: 'deny-projects', field: 'name', reason: `project ${project} matches "${denied.glob}" in deny-projects of this index` };
    }
    if (this.#allow.some((list) => !list.some((g) => g.re.test(project)))) {
      return { action, project, rule: 'allow-projects', field: 'name', reason: `project ${project} is not in allow-projects of this index` };
    }
    return null;
  }

  /**
   * File-level rules: `max-file-size` for every action, `min-release-age` when serving.
   * `now` is milliseconds since the epoch.
   */
  fileDenial(action: PolicyAction, project: string, file: FileFacts, now = Date.now()): PolicyDenial | null {
    const base = { action, project, filename: file.filename, version: file.version };
    if (this.maxFileSize !== undefined && file.size !== null && file.size > this.maxFileSize) return sizeDenial(base, this.maxFileSize);
    const minAge = this.minReleaseAgeSecs;
    if (action === 'serve' && minAge !== undefined && minAge > 0) {
      // An unknown or unreadable time cannot prove the file is old enough; nor can one in the future.
      const uploaded = file.uploadTime ? Date.parse(file.uploadTime) : Number.NaN;
      const ageSecs = (now - uploaded) / 1000;
      if (Number.isNaN(uploaded) || ageSecs < minAge) {
        return {
          ...base,
          rule: 'min-release-age',
          field: 'upload-time',
          reason: `${file.filename} ${uploadedWhen(file.uploadTime, ageSecs)}; this index serves files only once they are ${formatDuration(minAge)} old (min-release-age)`,
        };
      }
    }
    return null;
  }

  /** Project rules first (the denial then names the file too), then file rules. */
  denial(action: PolicyAction, project: string, file: FileFacts, now = Date.now()): PolicyDenial | null {
    const denied = this.projectDenial(action, project);
    if (denied) return { ...denied, filename: file.filename, version: file.version };
    return this.fileDenial(action, project, file, now);
  }
}

/** When a file was uploaded, for a `min-release-age` reason. */
function uploadedWhen(uploadTime: string | null | undefined, ageSecs: number): string {
  if (Number.isNaN(ageSecs)) return uploadTime ? `has an unreadable upload time (${uploadTime})` : 'has no known upload time';
  // A clock ahead of ours, or a bad record: either way its age cannot be known yet.
  if (ageSecs < 0) return `has an upload time in the future (${uploadTime}, ${formatDuration(-ageSecs)} ahead of this server's clock)`;
  return `was uploaded ${formatDuration(ageSecs)} ago`;
}

/** The `max-file-size` denial, also for an upload stopped at the limit before its size was known. */
export function sizeDenial(
  subject: { action: PolicyAction; project: string; filename: string; version: string },
  limit: number,
): PolicyDenial {
  return {
    ...subject,
    rule: 'max-file-size',
    field: 'size',
    reason: `${subject.filename} is larger than the max-file-size of ${limit} bytes allowed on this index`,
  };
}

function strictest(values: (number | undefined)[], pick: (...n: number[]) => number): number | undefined {
  const set = values.filter((v): v is number => v !== undefined);
  return set.length === 0 ? undefined : pick(...set);
}
