/** Rules for a configured route: safe segments, no clash with the server's own top-level paths. */
import type { EcosystemFacts } from './ecosystem-facts.js';
import { ConfigError } from './errors.js';

/** First path segments the server itself answers; an index route may not start with them. */
export const RESERVED_FIRST_SEGMENTS = new Set(['v2', '+api', '+status', '+stats', 'metrics', 'admin', 'browse', 'stats', 'pkg', 'healthz']);

export function checkRoute(route: string, ecosystem: EcosystemFacts, where: string): string[] {
  const segments = route.split('/').filter((s) => s !== '');
  if (segments.length === 0) throw new ConfigError(where, 'is empty', 'use a path such as "root/hosted"');
  for (const seg of segments) {
    // Never a dot segment, whatever an ecosystem's grammar says: it would walk the path tree.
    if (seg === '.' || seg === '..' || !ecosystem.routeSegment.pattern.test(seg)) {
      throw new ConfigError(where, `segment "${seg}" of "${route}" is not allowed`, `use ${ecosystem.routeSegment.rule}`);
    }
  }
  if (RESERVED_FIRST_SEGMENTS.has(segments[0] as string)) {
    throw new ConfigError(where, `"${route}" starts with "${segments[0]}", which the server serves itself`, 'choose another first segment');
  }
  return segments;
}
