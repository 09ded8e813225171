/**
 * The version an image says it runs (`/+status`, the PackageRegistry's VERSION column): the
 * registry package's version, with the git commit it was built from as semver build metadata
 * (`0.1.0+3f9a0c21d4e7`, `.dirty` when tracked files differ from that commit). Two builds of one
 * package version then tell apart in a cluster, which is what an upgrade between them is checked
 * by. Outside a git checkout (a source tarball) it is the package version alone.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The commit `repo` is checked out at (12 hex digits), `.dirty` if tracked files changed; undefined without git. */
export function sourceRevision(repo: string): string | undefined {
  const git = (args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const commit = git(['rev-parse', '--short=12', 'HEAD']).trim();
    // Untracked files (build output, .tools) are not the sources: only tracked ones count.
    const dirty = git(['status', '--porcelain', '--untracked-files=no']).trim() !== '';
    return dirty ? `${commit}.dirty` : commit;
  } catch {
    return undefined;
  }
}

/** The registry package's version in `repo`, with `revision` as build metadata when given. */
export function imageVersion(repo: string, revision = sourceRevision(repo)): string {
  const version = (JSON.parse(readFileSync(join(repo, 'registry', 'package.json'), 'utf8')) as { version: string }).version;
  return revision ? `${version}+${revision}` : version;
}

/** A package.json's bytes with `version` replaced (the rest as it was). */
export function withVersion(packageJson: Buffer, version: string): Buffer {
  const manifest = JSON.parse(packageJson.toString('utf8')) as Record<string, unknown>;
  return Buffer.from(`${JSON.stringify({ ...manifest, version }, null, 2)}\n`);
}
