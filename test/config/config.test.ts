/**
 * The config as a user meets it: through the `velodex` command. Every bad config stops with a
 * message that names the key and the index; a good one lists what would be served.
 */
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { displayUrl } from '../../registry/src/config/sanitize.js';
import { hosted, oci, toml } from '../support/config.js';
import { CLI } from '../support/paths.js';
import { run } from '../support/run.js';
import { freePort, startVelodex, tempDir } from '../support/velodex.js';

function configFile(text: string): string {
  const dir = tempDir('velodex-config-');
  const path = join(dir, 'velodex.toml');
  writeFileSync(path, text);
  return path;
}

/** A token file holding only white space and a newline, as an editor might leave it. */
function blankFile(): string {
  const path = join(tempDir('velodex-config-'), 'token');
  writeFileSync(path, '  \n');
  return path;
}

async function checkConfig(text: string, env: Record<string, string> = {}) {
  return run(process.execPath, [CLI, 'check-config', configFile(text)], { allowFailure: true, env });
}

describe('velodex check-config', () => {
  it('lists the indexes of a good config', async () => {
    const res = await checkConfig(`
port = 5000
[[index]]
name = "hosted"
route = "/root/hosted/"
hosted = true
upload_token = "s3cret-token"

[[index]]
name = "pypi"
route = "root/pypi"
cached = "https://user:pw@pypi.example/simple/?key=abc"

[[index]]
name = "dev"
route = "root/dev"
members = ["hosted", "pypi"]
upload_target = "hosted"
`);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('index hosted: /root/hosted/ python hosted');
    expect(res.stdout).toContain('index dev: /root/dev/ python virtual members=hosted,pypi');
    // Scheme and host, and a fingerprint of the rest (a path may carry a token).
    expect(res.stdout).toContain(`upstream=${displayUrl('https://user:pw@pypi.example/simple/?key=abc')}`);
    expect(res.stdout).not.toContain('/simple/');
    expect(res.stdout).toContain('listen: http://127.0.0.1:5000');
    // Neither the token nor the upstream credentials are ever printed.
    expect(res.stdout + res.stderr).not.toMatch(/s3cret-token|user:pw|key=abc/);
  });

  it.each([
    [
      'an unknown key, naming it and the index',
      `[[index]]\nname = "hosted"\nroute = "root/hosted"\nhosted = true\nupload_tokn = "x"\n`,
      /index "hosted" \(index\[0\]\): unknown key "upload_tokn".*fix:/,
    ],
    ['an unknown top-level key', `prot = 4433\n`, /unknown key "prot"/],
    [
      'a missing token file',
      `[[index]]\nname = "hosted"\nroute = "root/hosted"\nhosted = true\nupload_token_file = "/nonexistent/token"\n`,
      /index "hosted" \(index\[0\]\)\.upload_token_file: cannot read \/nonexistent\/token \(ENOENT\)/,
    ],
    [
      'two indexes on one route',
      `[[index]]\nname = "a"\nroute = "root/x"\nhosted = true\n[[index]]\nname = "b"\nroute = "/root/x/"\nhosted = true\n`,
      /index "b"\.route: route "root\/x" is also the route of index "a".*fix: give every index its own route/,
    ],
    ['an index with two roles', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\ncached = "https://x.example/simple/"\n`, /index "a" \(index\[0\]\): has several roles/],
    ['an index name that cannot be a storage key', `[[index]]\nname = "Team Packages"\nroute = "r/a"\nhosted = true\n`, /index "Team Packages" \(index\[0\]\)\.name: must be 1-100 letters/],
    ['an index with no role', `[[index]]\nname = "a"\nroute = "r/a"\n`, /has no role.*hosted = true/],
    ['a secret given two ways', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupload_token = "x"\nupload_token_env = "X"\n`, /upload_token: is given more than one way/],
    ['an unset secret variable', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupload_token_env = "VELODEX_TEST_UNSET_VAR"\n`, /environment variable VELODEX_TEST_UNSET_VAR is not set/],
    ['a virtual member that does not exist', `[[index]]\nname = "v"\nroute = "r/v"\nmembers = ["ghost"]\n`, /index "v"\.members: names "ghost", which is not a configured index/],
    ['an upload target that is not hosted', `[[index]]\nname = "c"\nroute = "r/c"\ncached = "https://x.example/simple/"\n[[index]]\nname = "v"\nroute = "r/v"\nmembers = ["c"]\nupload_target = "c"\n`, /upload_target: "c" is not a hosted index/],
    ['a route segment that escapes', `[[index]]\nname = "a"\nroute = "root/../x"\nhosted = true\n`, /segment "\.\." of "root\/\.\.\/x" is not allowed/],
    ['a route on a reserved path', `[[index]]\nname = "a"\nroute = "v2/x"\nhosted = true\n`, /starts with "v2", which the server serves itself/],
    ['an OCI route with uppercase', `[[index]]\nname = "a"\nroute = "Root/oci"\necosystem = "oci"\nhosted = true\n`, /segment "Root"/],
    ['a key for another role', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupstream_concurrency = 4\n`, /upstream_concurrency: only applies to a cached index/],
    ['upstream_deletions on a hosted index', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupstream_deletions = "keep"\n`, /index "a" \(index\[0\]\)\.upstream_deletions: only applies to a cached index, this one is hosted/],
    ['an upstream_deletions that is neither follow nor keep', `[[index]]\nname = "c"\nroute = "r/c"\ncached = "https://x.example/simple/"\nupstream_deletions = "retain"\n`, /upstream_deletions: must be "follow" \(drop what the upstream deleted\) or "keep" \(serve the last good copy\)/],
    ['broken TOML', `[[index]\nname = `, /not valid TOML/],
    ['an external URL with a path', `external_urls = ["https://registry.example.com/pypi"]\n`, /external_urls\[0\]: must be an origin: scheme, host and port only.*use "https:\/\/registry\.example\.com"/s],
    ['an external URL that is no URL', `external_urls = ["registry.example.com"]\n`, /external_urls\[0\]: "registry\.example\.com" is not a URL/],
    ['an external URL with credentials', `external_urls = ["https://u:p@registry.example.com"]\n`, /external_urls\[0\]: must not carry credentials/],
    ['an object store timeout on the filesystem backend', `[storage]\nidle_timeout_secs = 5\n`, /storage\.idle_timeout_secs: is for the object store \(backend = "s3"\)/],
    ['an idle timeout of zero', `[storage]\nbackend = "s3"\nidle_timeout_secs = 0\n`, /idle_timeout_secs/],
    // A blank token would accept an empty password.
    ['an empty upload token', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupload_token = ""\n`, /index "a" \(index\[0\]\)\.upload_token: is empty/],
    ['an upload token of white space', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupload_token = "  \\t "\n`, /upload_token: is empty/],
    ['a token variable of white space', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupload_token_env = "VELODEX_TEST_BLANK"\n`, /environment variable VELODEX_TEST_BLANK holds only white space/],
    ['a token file of white space', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupload_token_file = "${blankFile()}"\n`, /upload_token_file: .* is empty or only white space/],
    ['an empty webhook secret', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.webhook]]\nurl = "http://127.0.0.1:9/h"\nsecret = ""\n`, /webhook\[0\]\.secret: is empty/],
    ['a webhook URL that is not http', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.webhook]]\nurl = "ftp://127.0.0.1/h"\n`, /webhook\[0\]\.url: must be an http or https URL/],
    ['a webhook URL given two ways', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.webhook]]\nurl = "http://127.0.0.1:9/h"\nurl_env = "HOOK_URL"\n`, /webhook\[0\]\.url: is given more than one way.*set only one of url, url_env, url_file/],
    ['a webhook without a URL', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.webhook]]\nevents = ["upload"]\n`, /webhook\[0\]\.url: is missing.*url, url_env, url_file/],
    ['a webhook URL variable that is not set', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.webhook]]\nurl_env = "VELODEX_TEST_UNSET_HOOK"\n`, /webhook\[0\]\.url_env: environment variable VELODEX_TEST_UNSET_HOOK is not set/],
    ['a webhook URL file that is not there', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.webhook]]\nurl_file = "/nonexistent/hook-url"\n`, /webhook\[0\]\.url_file: cannot read \/nonexistent\/hook-url \(ENOENT\)/],
    ['an inline webhook URL that is no URL', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.webhook]]\nurl = "not a url"\n`, /webhook\[0\]\.url: is not a valid URL/],
    // Named tokens ([[index.token]]).
    ['a write scope on a cached index', `[[index]]\nname = "c"\nroute = "r/c"\ncached = "https://x.example/simple/"\n[[index.token]]\nname = "ci"\nsecret = "t"\nscopes = ["upload"]\n`, /index "c" \(index\[0\]\)\.token\[0\]\.scopes: "upload" needs a hosted index, this one is cached/],
    ['a write scope on a virtual index', `[[index]]\nname = "h"\nroute = "r/h"\nhosted = true\n[[index]]\nname = "v"\nroute = "r/v"\nmembers = ["h"]\nupload_target = "h"\n[[index.token]]\nname = "ci"\nsecret = "t"\nscopes = ["read", "delete"]\n`, /token\[0\]\.scopes: "delete" needs a hosted index.*give the token to that hosted index/],
    ['two tokens of one name', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.token]]\nname = "ci"\nsecret = "t1"\nscopes = ["upload"]\n[[index.token]]\nname = "ci"\nsecret = "t2"\nscopes = ["delete"]\n`, /token\[1\]\.name: "ci" is the name of another token of this index/],
    ['a token without a secret', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.token]]\nname = "ci"\nscopes = ["upload"]\n`, /token\[0\]\.secret: is missing.*secret, secret_env or secret_file/],
    ['a token with an unknown scope', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.token]]\nname = "ci"\nsecret = "t"\nscopes = ["push"]\n`, /token\.0\.scopes\.0: must be "read", "upload" or "delete"/],
    ['a token expiry without an offset', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.token]]\nname = "ci"\nsecret = "t"\nscopes = ["upload"]\nexpires = 2027-06-30T12:00:00\n`, /token\[0\]\.expires: is a date-time without an offset.*2027-06-30T00:00:00Z/],
    ['a token expiry that is no date', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.token]]\nname = "ci"\nsecret = "t"\nscopes = ["upload"]\nexpires = "next year"\n`, /token\[0\]\.expires: "next year" is not a date or an offset date-time/],
    // ServiceAccount rules ([[index.service_account]]) and [kubernetes].
    ['a ServiceAccount rule with a write scope on a cached index', `[[index]]\nname = "c"\nroute = "r/c"\ncached = "https://x.example/simple/"\n[[index.service_account]]\nnamespace = "ci"\nname = "*"\nscopes = ["upload"]\n`, /index "c" \(index\[0\]\)\.service_account\[0\]\.scopes: "upload" needs a hosted index, this one is cached/],
    ['two rules for one ServiceAccount', `[kubernetes]\napi_server = "https://k8s.example"\n[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.service_account]]\nnamespace = "ci"\nname = "builder"\nscopes = ["read"]\n[[index.service_account]]\nnamespace = "ci"\nname = "builder"\nscopes = ["upload"]\n`, /service_account\[1\]: ServiceAccount "builder" of namespace "ci" has another rule on this index.*one rule per index/],
    ['a ServiceAccount name that Kubernetes would not take', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.service_account]]\nnamespace = "ci"\nname = "Builder"\nscopes = ["read"]\n`, /service_account\.0\.name: must be a ServiceAccount name .* or "\*"/],
    ['ServiceAccount rules outside a pod with no [kubernetes] api_server', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.service_account]]\nnamespace = "ci"\nname = "*"\nscopes = ["upload"]\n`, /kubernetes\.api_server: is not set, and velodex does not run in a Kubernetes pod \(KUBERNETES_SERVICE_HOST is unset\).*set api_server, ca_file and token_file in \[kubernetes\]/],
    ['an API server that is not https', `[kubernetes]\napi_server = "http://127.0.0.1:6443"\n`, /kubernetes\.api_server: "http:\/\/127\.0\.0\.1:6443" is not an https URL/],
    // Trusted publishers ([[index.trusted_publisher]], [trusted_publishing]).
    ['a trusted publisher on a cached index', `[[index]]\nname = "c"\nroute = "r/c"\ncached = "https://x.example/simple/"\n[[index.trusted_publisher]]\nname = "ci"\nissuer = "https://token.actions.githubusercontent.com"\nrepository = "acme/w"\n`, /index "c" \(index\[0\]\)\.trusted_publisher: only applies to a hosted index, this one is cached/],
    ['a trusted publisher that pins no repository', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.trusted_publisher]]\nname = "ci"\nissuer = "https://token.actions.githubusercontent.com"\nenvironment = "pypi"\n`, /trusted_publisher\[0\]: names no repository or project, so every run the issuer signs for would match.*set repository \(GitHub Actions\) or project_path \(GitLab CI\)/],
    ['a workflow without its repository', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.trusted_publisher]]\nname = "ci"\nissuer = "https://gitlab.example"\nproject_path = "acme/w"\nworkflow = "release.yml"\n`, /trusted_publisher\[0\]\.workflow: needs repository/],
    ['a workflow that is a path', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.trusted_publisher]]\nname = "ci"\nissuer = "https://token.actions.githubusercontent.com"\nrepository = "acme/w"\nworkflow = ".github/workflows/release.yml"\n`, /trusted_publisher\.0\.workflow: must be the workflow file name, e\.g\. "release\.yml"/],
    ['two trusted publishers of one name', `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.trusted_publisher]]\nname = "ci"\nissuer = "https://i.example"\nrepository = "acme/w"\n[[index.trusted_publisher]]\nname = "ci"\nissuer = "https://i.example"\nrepository = "acme/v"\n`, /trusted_publisher\[1\]\.name: "ci" is the name of another trusted publisher of this index/],
    ['a minted token lifetime of a week', `[trusted_publishing]\ntoken_lifetime = "7d"\n`, /trusted_publishing\.token_lifetime: must be between 1m and 24h/],
    ['an unknown key in [auth]', `[auth]\ntoken_signing_keys = "x"\n`, /auth: unknown key "token_signing_keys"/],
    ['a token signing key given two ways', `[auth]\ntoken_signing_key = "${'k'.repeat(40)}"\ntoken_signing_key_env = "X"\n`, /auth\.token_signing_key: is given more than one way/],
    // A short HMAC key could be found by guessing offline from any one token it signed.
    ['a short token signing key', `[auth]\ntoken_signing_key_env = "VELODEX_TEST_SHORT_KEY"\n`, /auth\.token_signing_key_env: is 11 characters long; at least 32 are needed.*openssl rand -base64 48/],
  ])('refuses %s', async (_what, text, message) => {
    // Not in a pod, whatever runs the suite: [kubernetes] has no defaults then.
    const res = await checkConfig(text, { VELODEX_TEST_BLANK: ' \n ', VELODEX_TEST_SHORT_KEY: 'short-key-1', KUBERNETES_SERVICE_HOST: '' });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(message);
  });

  it('lets VELODEX_PORT override the file and --port override both', async () => {
    const file = configFile('port = 5000\n');
    const fromEnv = await run(process.execPath, [CLI, 'check-config', file], { env: { VELODEX_PORT: '5055' } });
    expect(fromEnv.stdout).toContain('listen: http://127.0.0.1:5055');
    const fromFlag = await run(process.execPath, [CLI, 'check-config', file, '--port', '6066'], { env: { VELODEX_PORT: '5055' } });
    expect(fromFlag.stdout).toContain('listen: http://127.0.0.1:6066');
  });

  it('says where the token signing key comes from, never what it is', async () => {
    const generated = await checkConfig('port = 5000\n');
    expect(generated.stdout).toMatch(/^token signing key: generated once into .*token-signing-key$/m);
    const fromEnv = await checkConfig('[auth]\ntoken_signing_key_env = "VELODEX_TEST_KEY"\n', { VELODEX_TEST_KEY: 'signing-key-value-0123456789-abcdefgh' });
    expect(fromEnv.stdout).toMatch(/^token signing key: env VELODEX_TEST_KEY$/m);
    expect(fromEnv.stdout).not.toContain('signing-key-value');
  });

  it('takes a webhook URL from a file or a variable, as a secret, and never quotes it', async () => {
    const dir = tempDir('velodex-config-');
    const good = join(dir, 'hook-url');
    writeFileSync(good, 'https://hooks.chat.example/services/T0A1/B0B2/url-key-6c1d\n');
    const hook = (key: string) => `[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\n[[index.webhook]]\n${key}\nevents = ["upload"]\n`;
    for (const [key, env] of [[`url_file = "${good}"`, {}], ['url_env = "VELODEX_TEST_HOOK_URL"', { VELODEX_TEST_HOOK_URL: 'https://hooks.chat.example/services/T0A1/B0B2/url-key-6c1d' }]] as const) {
      const res = await checkConfig(hook(key), env);
      expect(res.stderr, key).toBe('');
      expect(res.code).toBe(0);
      expect(res.stdout + res.stderr).not.toContain('url-key-6c1d');
    }
    // A file that holds something else than a URL: the message names the key, not the content.
    const bad = join(dir, 'bad-url');
    writeFileSync(bad, 'hooks.chat.example/services/no-scheme-key-93af\n');
    const refused = await checkConfig(hook(`url_file = "${bad}"`));
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/webhook\[0\]\.url_file: is not a valid URL/);
    expect(refused.stderr).not.toContain('no-scheme-key-93af');
    const ftp = join(dir, 'ftp-url');
    writeFileSync(ftp, 'ftp://files.example/ftp-key-11b0\n');
    const notHttp = await checkConfig(hook(`url_file = "${ftp}"`));
    expect(notHttp.stderr).toMatch(/webhook\[0\]\.url_file: must be an http or https URL/);
    expect(notHttp.stderr).not.toContain('ftp-key-11b0');
  });

  it('reads a secret from the environment without printing it', async () => {
    const res = await checkConfig(`[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupload_token_env = "VELODEX_TEST_TOKEN"\n`, {
      VELODEX_TEST_TOKEN: 'env-secret-value',
    });
    expect(res.code).toBe(0);
    expect(res.stdout).not.toContain('env-secret-value');
  });
});

describe('velodex serve', () => {
  it('does not start on a bad config', async () => {
    const res = await run(process.execPath, [CLI, 'serve', '--port', '0', '--config', configFile('bogus = 1\n')], { allowFailure: true, timeoutMs: 20_000 });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/unknown key "bogus"/);
    expect(res.stdout).not.toContain('velodex listening');
  });

  it('does not start with an empty upload token, which would accept an empty password', async () => {
    const config = configFile(`[[index]]\nname = "a"\nroute = "r/a"\nhosted = true\nupload_token = " "\n`);
    const res = await run(process.execPath, [CLI, 'serve', '--port', '0', '--config', config], { allowFailure: true, timeoutMs: 20_000 });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/index "a" \(index\[0\]\)\.upload_token: is empty/);
    expect(res.stdout).not.toContain('velodex listening');
  });

  it('names --port and VELODEX_PORT when the port is taken', async () => {
    const first = await startVelodex();
    try {
      const res = await run(process.execPath, [CLI, 'serve', '--port', String(first.port), '--data-dir', tempDir()], { allowFailure: true, timeoutMs: 20_000 });
      expect(res.code).toBe(1);
      expect(res.stderr).toContain(`cannot listen on 127.0.0.1:${first.port}: another program uses that port`);
      expect(res.stderr).toMatch(/--port or VELODEX_PORT/);
    } finally {
      await first.stop();
    }
  });

  it('tells a person, at log level warn too, each index URL and where its upload token is', async () => {
    const server = await startVelodex({
      port: await freePort(),
      env: { VELODEX_LOG_LEVEL: 'warn', TEAM_TOKEN: 'banner-token-6c1d' },
      config: toml(hosted('team', { route: 'team/py', token: { env: 'TEAM_TOKEN' } }), oci.hosted('images', { route: 'team/images' })),
    });
    await server.stop();
    const logs = server.logs();
    expect(logs).toContain(`velodex listening on ${server.url}`);
    expect(logs).toMatch(new RegExp(`team +python hosted +${server.url}/team/py/simple/ +upload token from \\$TEAM_TOKEN`));
    expect(logs).toMatch(new RegExp(`images +oci hosted +127\\.0\\.0\\.1:${server.port}/team/images/<image> +uploads disabled`));
    expect(logs).not.toContain('banner-token-6c1d');
  });

  it('generates the default upload token once, mode 0600, and keeps it across restarts', async () => {
    const dataDir = tempDir();
    const first = await startVelodex({ dataDir });
    const path = join(dataDir, 'upload-token');
    const { readFileSync } = await import('node:fs');
    const token = readFileSync(path, 'utf8').trim();
    await first.stop();
    // Never starts with '-', so `twine upload -p <token>` cannot mistake it for an option.
    expect(token).toMatch(/^velodex_[0-9a-f]{48}$/);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(first.logs()).toContain(path);
    expect(first.logs()).not.toContain(token);
    const second = await startVelodex({ dataDir });
    await second.stop();
    expect(readFileSync(path, 'utf8').trim()).toBe(token);
  });

  it('takes the token from VELODEX_UPLOAD_TOKEN instead of generating one', async () => {
    const dataDir = tempDir();
    const server = await startVelodex({ dataDir, env: { VELODEX_UPLOAD_TOKEN: 'from-env-token' } });
    await server.stop();
    const { existsSync } = await import('node:fs');
    expect(existsSync(join(dataDir, 'upload-token'))).toBe(false);
    expect(server.logs()).not.toContain('from-env-token');
  });
});
