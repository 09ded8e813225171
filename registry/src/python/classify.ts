/**
 * The rate-limit class of a request under a Python index route, from its method and the path
 * segments after the route alone (nothing is read): file downloads (and their `.metadata`
 * siblings) are `download`; other reads (Simple pages, legacy JSON, `+api`, inspect) are `read`;
 * every other method (upload, yank, delete, restore, promote) is `write`.
 */
import type { RateClassName } from '../config/types.js';

export function classifyPython(method: string, rest: readonly string[]): RateClassName {
  if (method !== 'GET' && method !== 'HEAD') return 'write';
  return rest[0] === 'files' ? 'download' : 'read';
}
