/**
 * One `[[index.webhook]]` target as the server uses it. The URL is given as `url`, `url_env` or
 * `url_file` (exactly one), as every secret is: receivers whose path is their credential (the
 * incoming webhooks of chat services) take it from a secret, and the resolved config remembers
 * that, so the whole URL is scrubbed from every log line (observe/log.ts). User info in the URL,
 * however it was given, moves into Basic credentials: fetch refuses URLs that carry them.
 *
 * No message here quotes the URL: it may be the secret itself.
 */
import { ConfigError } from './errors.js';
import { resolveSecret, type SecretSources } from './resolve-secret.js';
import { Secret } from './secret.js';
import type { WebhookConfig } from './types.js';
import type { WebhookFileConfig } from './schema.js';

/** Resolves one webhook table; `where` names it (`index "a" (index[0]).webhook[0]`). */
export function resolveWebhook(w: WebhookFileConfig, where: string, secrets: SecretSources): WebhookConfig {
  const given = resolveSecret(w, 'url', where, secrets);
  if (!given) throw new ConfigError(`${where}.url`, 'is missing', 'set one of url, url_env, url_file (the receiver\'s http or https URL)');
  const key = given.source === 'inline' ? 'url' : given.source.startsWith('env:') ? 'url_env' : 'url_file';
  return {
    ...webhookUrl(given.reveal(), `${where}.${key}`),
    ...(given.source === 'inline' ? {} : { urlSource: given.source }),
    secret: resolveSecret(w, 'secret', where, secrets),
    events: w.events,
  };
}

function webhookUrl(raw: string, where: string): Pick<WebhookConfig, 'url' | 'basicAuth'> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(where, 'is not a valid URL', 'give the receiver\'s full http(s) URL, like https://ci.example/hooks/velodex');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(where, `must be an http or https URL, not ${url.protocol}`, 'give the receiver\'s http(s) URL');
  }
  if (url.username === '' && url.password === '') return { url: raw };
  const basicAuth = new Secret(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`, 'inline');
  url.username = '';
  url.password = '';
  return { url: url.toString(), basicAuth };
}
