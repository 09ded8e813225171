/**
 * `[[index.trusted_publisher]]` and `[trusted_publishing]`, resolved and checked
 * (access/publishing/ uses them). A publisher names its issuer and the claims that pin one CI
 * identity: a rule set that any token of the issuer would meet (GitHub signs tokens for every
 * repository on GitHub) is refused, so a publisher always names a repository or a project.
 */
import { parseDuration } from './duration.js';
import { ConfigError } from './errors.js';
import type { FileConfig, TrustedPublisherFileConfig } from './schema.js';
import type { TrustedPublisher, TrustedPublishingConfig } from './types.js';

/** Claims that say which repository or project ran: one of them (or `sub`) must be pinned. */
const PINNING_CLAIMS = ['repository', 'repository_id', 'project_path', 'project_id', 'sub'];
/** The audience identity tokens are asked for unless configured: a CI's OIDC token, a pod's projected ServiceAccount token. */
export const DEFAULT_AUDIENCE = 'velodex';
export const DEFAULT_PUBLISH_TOKEN_LIFETIME_SECS = 15 * 60;
/** A minted token is for one publishing run: longer than a day is a standing credential, which named tokens are for. */
const MAX_PUBLISH_TOKEN_LIFETIME_SECS = 24 * 3600;

/** A hosted index's publishers (config/load.ts refuses them on the other roles). */
export function resolvePublishers(given: readonly TrustedPublisherFileConfig[] | undefined, where: string): TrustedPublisher[] {
  const seen = new Set<string>();
  return (given ?? []).map((p, i) => {
    const at = `${where}.trusted_publisher[${i}]`;
    if (seen.has(p.name)) throw new ConfigError(`${at}.name`, `"${p.name}" is the name of another trusted publisher of this index`, 'give each publisher of an index its own name');
    seen.add(p.name);
    const claims: Record<string, string> = { ...(p.claims ?? {}) };
    if (p.repository !== undefined) claims.repository = p.repository;
    if (p.environment !== undefined) claims.environment = p.environment;
    if (p.project_path !== undefined) claims.project_path = p.project_path;
    if (!PINNING_CLAIMS.some((c) => claims[c] !== undefined)) {
      throw new ConfigError(at, 'names no repository or project, so every run the issuer signs for would match', 'set repository (GitHub Actions) or project_path (GitLab CI)');
    }
    if (p.workflow !== undefined && claims.repository === undefined) {
      throw new ConfigError(`${at}.workflow`, 'needs repository: a workflow file is named within its repository', 'set repository too');
    }
    const publisher: TrustedPublisher = { name: p.name, issuer: p.issuer.replace(/\/+$/, ''), claims };
    if (p.workflow !== undefined) publisher.workflow = p.workflow;
    if (p.ref !== undefined) publisher.ref = p.ref;
    if (p.projects !== undefined) publisher.projects = p.projects;
    return publisher;
  });
}

export function resolveTrustedPublishing(given: FileConfig['trusted_publishing']): TrustedPublishingConfig {
  const lifetime = given?.token_lifetime === undefined ? DEFAULT_PUBLISH_TOKEN_LIFETIME_SECS : parseDuration(given.token_lifetime);
  if (lifetime === null || lifetime < 60 || lifetime > MAX_PUBLISH_TOKEN_LIFETIME_SECS) {
    throw new ConfigError('trusted_publishing.token_lifetime', `must be between 1m and 24h`, 'minted tokens are for one publishing run; the default is 15m');
  }
  return { audience: given?.audience ?? DEFAULT_AUDIENCE, tokenLifetimeSecs: lifetime };
}
