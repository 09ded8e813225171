/**
 * The common frame of the real-client suites (crane, oras, regctl, skopeo): one velodex per file,
 * its upload token and `host:port`, and a private temp folder that is the client's HOME, so no
 * configuration or credentials of the machine are used. The server runs the embedded default's
 * indexes (the OCI one at `root/oci`), plus any a suite adds (an index with named tokens).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { defaultIndexes } from '../support/backend.js';
import { toml, type ConfigPart } from '../support/config.js';
import { defaultToken, startVelodex, tempDir, type Velodex } from '../support/velodex.js';

export interface ClientSuite {
  server: Velodex;
  /** The upload token of the default hosted index. */
  token: string;
  /** `127.0.0.1:<port>`, as image references want it. */
  host: string;
  /** The suite's temp folder, also the client's HOME. */
  work: string;
  /** The client's environment: HOME plus what `opts.env` added. */
  env: Record<string, string>;
}

/**
 * Registers the suite's `beforeAll`/`afterAll` and returns the suite, filled in once `beforeAll`
 * has run. `env` adds client configuration paths below `work`; `setup` runs last (a login);
 * `indexes` are served beside the default's.
 */
export function clientSuite(
  client: string,
  opts: { env?: (work: string) => Record<string, string>; setup?: (suite: ClientSuite) => Promise<void> | void; indexes?: ConfigPart[] } = {},
): ClientSuite {
  const suite = {} as ClientSuite;
  beforeAll(async () => {
    // The default's indexes written out (its upload token generated into the data dir, as without a file).
    const dataDir = tempDir();
    const config = opts.indexes && toml(defaultIndexes(dataDir), ...opts.indexes);
    suite.server = await startVelodex({ config, dataDir });
    suite.token = defaultToken(suite.server);
    suite.host = `127.0.0.1:${suite.server.port}`;
    suite.work = tempDir(`velodex-${client}-`);
    suite.env = { HOME: suite.work, ...opts.env?.(suite.work) };
    await opts.setup?.(suite);
  });
  afterAll(async () => {
    await suite.server?.stop();
  });
  return suite;
}

/**
 * Pushes `manifest` again to `<name>:<reference>` the way a hand-written `curl -X PUT
 * --data-binary` does: with curl's default `Content-Type: application/x-www-form-urlencoded`.
 * Returns the HTTP status.
 */
export async function curlRepush(suite: ClientSuite, name: string, reference: string, manifest: Buffer): Promise<number> {
  const file = join(suite.work, `repush-${reference}.json`);
  writeFileSync(file, manifest);
  const url = `${suite.server.url}/v2/${name}/manifests/${reference}`;
  const res = await run(tool('curl'), ['-sS', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'PUT', '-u', `__token__:${suite.token}`, '--data-binary', `@${file}`, url]);
  return Number(res.stdout.trim());
}
