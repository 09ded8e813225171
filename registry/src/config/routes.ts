/** Rules for a configured route: safe segments, no clash with the server's own top-level paths. */
import { ConfigError } from './errors.js';
import type { EcosystemId } from './types.js';

/** First path segments the server itself answers; an index route may not start with them. */
export const RESERVED_FIRST_SEGMENTS = new Set(['v2', '+api', '+status', '+stats', 'metrics', 'admin', 'browse', 'stats', 'pkg', 'healthz']);

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._~-]*$/;
/** OCI repository name components (distribution spec): lowercase, separators inside. */
const OCI_SEGMENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;

export function checkRoute(route: string, ecosystem: EcosystemId, where: string): string[] {
  const segments = route.split('/').filter((s) => s !== '');
  if (segments.length === 0) throw new ConfigError(where, 'is empty', 'use a path such as "root/hosted"');
  for (const seg of segments) {
    const ok = ecosystem === 'oci' ? OCI_SEGMENT.test(seg) : SEGMENT.test(seg) && seg !== '.' && seg !== '..';
    if (!ok) {
      const rule = ecosystem === 'oci' ? 'lowercase letters, digits and . _ - between them' : 'letters, digits and . _ ~ - (not starting with a dot)';
      throw new ConfigError(where, `segment "${seg}" of "${route}" is not allowed`, `use ${rule}`);
    }
  }
  if (ecosystem !== 'oci' && RESERVED_FIRST_SEGMENTS.has(segments[0] as string)) {
    throw new ConfigError(where, `"${route}" starts with "${segments[0]}", which the server serves itself`, 'choose another first segment');
  }
  return segments;
}
