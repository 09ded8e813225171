/**
 * An earlier release of velodex, built the way that release builds itself: its sources taken from
 * this clone's git history (`git archive`, so the clone and its worktrees are left as they are)
 * into a temp folder, compiled there with its own `npm run build`, and made into an image by its own
 * `make image` script (hack/image/build.ts). What an upgrade test installs first: its image and
 * its charts/.
 *
 * Lean on purpose: when the release's package-lock.json is this tree's, its node_modules are links
 * into this tree's (the workspaces' own links point into the release's folders), so nothing is
 * installed; otherwise `npm ci` runs there. Its `.tools` is this tree's, so the image build reuses
 * the cached Node.js binary.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, symlinkSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { REPO, TOOLS } from './paths.js';
import { run } from './run.js';
import { tempDir } from './velodex.js';

export interface PreviousRelease {
  /** The commit it was built from, as given. */
  commit: string;
  /** Its source tree (charts/, hack/, docs/ as they were). */
  dir: string;
  /** Its image, an OCI archive (`ctr images import` takes it), named `name`. */
  image: string;
  name: string;
  /** What its registry package says it is (what its pods report, as its own build does not stamp a commit). */
  version: string;
}

/** Builds the release at `commit` into an image named `name`; fails, saying why, when the commit is not in this clone. */
export async function buildPreviousRelease(commit: string, name: string): Promise<PreviousRelease> {
  try {
    execFileSync('git', ['-C', REPO, 'cat-file', '-e', `${commit}^{commit}`], { stdio: 'ignore' });
  } catch {
    throw new Error(
      `the previous release ${commit} is not in this clone's history (a shallow clone?): the upgrade test builds it from git. ` +
        'Fetch the history first (git fetch --unshallow, or actions/checkout with fetch-depth: 0).',
    );
  }
  const dir = tempDir('velodex-previous-');
  await run('bash', ['-c', 'set -o pipefail; git -C "$0" archive --format=tar "$1" | tar -x -C "$2"', REPO, commit, dir]);
  symlinkSync(realpathSync(TOOLS), join(dir, '.tools'));
  if (readFileSync(join(dir, 'package-lock.json')).equals(readFileSync(join(REPO, 'package-lock.json')))) {
    linkModules(join(REPO, 'node_modules'), join(dir, 'node_modules'));
  } else {
    await run('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, timeoutMs: 600_000 });
  }
  await run('npm', ['run', 'build'], { cwd: dir, timeoutMs: 600_000 });
  const image = join(dir, 'velodex.oci.tar');
  await run(process.execPath, ['--import', 'tsx', join(dir, 'hack', 'image', 'build.ts'), '--out', image, '--name', name], { cwd: dir, timeoutMs: 600_000 });
  if (!existsSync(image)) throw new Error(`the previous release's make image wrote no ${image}`);
  const version = (JSON.parse(readFileSync(join(dir, 'registry', 'package.json'), 'utf8')) as { version: string }).version;
  return { commit, dir, image, name, version };
}

/**
 * `to` as a folder of links to `from`'s packages, except the workspaces' own links (relative ones,
 * `@velodex/registry -> ../../registry`), which are made again as they are, so they point into
 * `to`'s tree: the release compiles against its own workspace packages.
 */
function linkModules(from: string, to: string): void {
  mkdirSync(to);
  for (const name of readdirSync(from)) {
    const source = join(from, name);
    const stat = lstatSync(source);
    if (stat.isSymbolicLink() && !isAbsolute(readlinkSync(source))) symlinkSync(readlinkSync(source), join(to, name));
    else if (name.startsWith('@') && stat.isDirectory() && readdirSync(source).some((n) => lstatSync(join(source, n)).isSymbolicLink())) linkModules(source, join(to, name));
    else symlinkSync(source, join(to, name));
  }
}
