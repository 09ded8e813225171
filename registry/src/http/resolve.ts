/** Longest-prefix route resolution on whole path segments. */
import type { IndexConfig } from '../config/types.js';

export interface Resolved {
  index: IndexConfig;
  /** The segments after the route. */
  rest: string[];
}

/** Finds the index whose route is the longest whole-segment prefix of `segments`. */
export function resolveRoute(indexes: readonly IndexConfig[], segments: readonly string[]): Resolved | null {
  let best: IndexConfig | null = null;
  for (const ix of indexes) {
    const route = ix.routeSegments;
    if (route.length > segments.length) continue;
    if (best && route.length <= best.routeSegments.length) continue;
    if (route.every((seg, i) => segments[i] === seg)) best = ix;
  }
  return best ? { index: best, rest: segments.slice(best.routeSegments.length) } : null;
}
