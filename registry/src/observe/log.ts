/**
 * The server's logger options: JSON lines on stdout, with credentials removed at two depths.
 *
 * 1. Structure: pino redacts credential headers wherever a known shape puts them (fastify's
 *    request, a library that logs `{ headers }` one or two levels down, as @fastify/multipart
 *    does at trace level with its busboy options).
 * 2. Text: every finished line is scrubbed before it is written, so a credential that reaches a
 *    log by a path nobody foresaw (an error message quoting a URL, a library's debug output) is
 *    still removed: the value of each configured secret, credential-bearing JSON keys at any
 *    depth, `Basic`/`Bearer` credentials anywhere in the text, and credential query parameters
 *    (`?token=`, `?password=`, docker's `?account=`, a presigned S3 URL's signature) of any URL.
 *
 * The scrub runs on every line at every level; it is a handful of string searches over a line of
 * a few hundred bytes, small beside the work of the request that logged it.
 */
import type { Config } from '../config/types.js';
import type { Secret } from '../config/secret.js';

export const REDACTED = '[redacted]';

const CREDENTIAL_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie'];

const REDACT_PATHS = CREDENTIAL_HEADERS.flatMap((h) => {
  const key = `["${h}"]`;
  return [`req.headers${key}`, `headers${key}`, `*.headers${key}`, `*.*.headers${key}`];
});

/** `"authorization":"..."` (any credential key, any depth) in a JSON line. */
const CREDENTIAL_KEY = new RegExp(`"(${CREDENTIAL_HEADERS.join('|')})":"(?:[^"\\\\]|\\\\.)*"`, 'gi');
/**
 * Query parameters that carry a credential, or a login name a person may have typed a token
 * into (`account`: docker's token requests name the username there): `?account=...&token=...`.
 */
const CREDENTIAL_QUERY = /([?&](?:account|password|passwd|token|access_token|refresh_token|client_secret|x-amz-signature|x-amz-credential|x-amz-security-token)=)[^&"\s#]*/gi;
/** An HTTP credential quoted in free text: `Basic dXNlcjpwdw==`, `Bearer eyJ...`. */
const SCHEME_CREDENTIAL = /\b(Basic|Bearer)(\s+|%20)[A-Za-z0-9+/=._~-]{4,}/g;

export interface LineSink {
  write(line: string): void;
}

/** Removes every credential from one serialized log line. */
export function scrubLine(line: string, secrets: readonly string[]): string {
  let out = line;
  for (const secret of secrets) {
    if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  }
  return out
    .replace(CREDENTIAL_KEY, `"$1":"${REDACTED}"`)
    .replace(SCHEME_CREDENTIAL, `$1 ${REDACTED}`)
    .replace(CREDENTIAL_QUERY, `$1${REDACTED}`);
}

/**
 * The literal forms the secrets can take in a JSON log line: as given, and JSON-escaped. Longest
 * first, so a secret that contains another is removed whole.
 */
function secretForms(secrets: Iterable<string>): string[] {
  const forms = new Set<string>();
  for (const value of secrets) {
    if (!value) continue;
    forms.add(value);
    forms.add(JSON.stringify(value).slice(1, -1));
  }
  return [...forms].sort((a, b) => b.length - a.length);
}

/**
 * Every secret value the config holds: tokens, passwords, keys, webhook secrets and credentials,
 * and the password and query values of upstream URLs. Usernames are left out on purpose: they are
 * not secrets on their own, and scrubbing a name like "user" would mangle every line that says
 * "user-agent"; the headers that carry them are redacted by key.
 */
export function configSecrets(config: Config): string[] {
  const found: Array<Secret | undefined> = [config.storage.accessKey, config.storage.secretKey, config.auth.tokenSigningKey, config.admin.token];
  const values: string[] = [];
  for (const ix of config.indexes) {
    if (ix.role === 'hosted') found.push(ix.uploadToken);
    for (const token of ix.tokens) found.push(token.secret);
    if (ix.role === 'cached') {
      for (const upstream of ix.upstreams) {
        found.push(upstream.password);
        values.push(...urlSecrets(upstream.url));
      }
    }
    for (const hook of ix.webhooks) {
      found.push(hook.secret, hook.basicAuth);
      if (hook.urlSource) values.push(...secretUrlForms(hook.url));
    }
  }
  for (const s of found) if (s) values.push(s.reveal());
  return values;
}

function urlSecrets(raw: string): string[] {
  try {
    const url = new URL(raw);
    return [url.password, decodeURIComponent(url.password), ...url.searchParams.values()].filter((v) => v.length > 0);
  } catch {
    return [];
  }
}

/**
 * A webhook URL given as `url_env` / `url_file` is a credential as a whole (a chat service's
 * incoming-webhook path is its key): the URL, the URL without its query, and its path and query
 * on their own. A path shorter than 8 characters is left to the whole-URL forms: scrubbing
 * something like "/hook" from every line would mangle the log and protect nothing.
 */
function secretUrlForms(raw: string): string[] {
  try {
    const url = new URL(raw);
    const tail = `${url.pathname}${url.search}`;
    return [raw, url.toString(), `${url.origin}${url.pathname}`, ...(tail.length >= 8 ? [tail, url.pathname] : []), ...urlSecrets(raw)].filter((v) => v.length >= 8);
  } catch {
    return [raw];
  }
}

/** A line sink that scrubs before writing to `out` (stdout by default). */
export function scrubbingSink(secrets: Iterable<string>, out: LineSink = process.stdout): LineSink {
  const forms = secretForms(secrets);
  return { write: (line) => out.write(scrubLine(line, forms)) };
}

/** The `logger` option for fastify. */
export function loggerOptions(config: Config, out?: LineSink) {
  return {
    level: config.logLevel,
    redact: { paths: REDACT_PATHS, censor: REDACTED },
    stream: scrubbingSink(configSecrets(config), out),
  };
}
