/**
 * The split of a raw `/v2/` URL into `<name>` and the action after it. `<name>` contains slashes,
 * so the action is recognised from the end of the path, the way the distribution router does it.
 */
import { HttpError } from '../../http/errors.js';
import { parseSafePath } from '../../http/path.js';
import { OciError } from '../model/errors.js';

export type OciAction =
  | { kind: 'base' }
  | { kind: 'catalog' }
  | { kind: 'token' }
  | { kind: 'manifest'; name: string[]; reference: string }
  | { kind: 'blob'; name: string[]; digest: string }
  | { kind: 'blob-contents'; name: string[]; digest: string }
  | { kind: 'upload-start'; name: string[] }
  | { kind: 'upload'; name: string[]; session: string }
  | { kind: 'tags'; name: string[] }
  | { kind: 'referrers'; name: string[]; digest: string };

export interface ParsedUrl {
  action: OciAction;
  query: URLSearchParams;
}

/** Parses a raw request URL that starts with `/v2`. */
export function parseOciUrl(rawUrl: string): ParsedUrl {
  let path;
  try {
    path = parseSafePath(rawUrl);
  } catch (err) {
    if (err instanceof HttpError) throw new OciError('NAME_INVALID', err.message);
    throw err;
  }
  const query = new URLSearchParams(path.query);
  const segs = path.segments.slice(1); // drop "v2"
  if (segs.length === 0) return { action: { kind: 'base' }, query };
  // No repository component starts with "_", so no `<name>` can be this path.
  if (segs.length === 1 && segs[0] === '_catalog') return { action: { kind: 'catalog' }, query };
  // The token realm (token-realm.ts): a `<name>` is always followed by an action, so no name is this path.
  if (segs.length === 1 && segs[0] === 'token') return { action: { kind: 'token' }, query };
  return { action: actionOf(segs), query };
}

function actionOf(s: string[]): OciAction {
  const n = s.length;
  const at = (i: number): string => s[n + i] ?? '';
  const name = (drop: number): string[] => {
    const result = s.slice(0, n - drop);
    if (result.length === 0) throw new OciError('NAME_INVALID', 'the request names no repository');
    return result;
  };
  if (n >= 4 && at(-3) === 'blobs' && at(-2) === 'uploads') return { kind: 'upload', name: name(3), session: at(-1) };
  if (n >= 3 && at(-2) === 'blobs' && at(-1) === 'uploads') return { kind: 'upload-start', name: name(2) };
  if (n >= 4 && at(-3) === 'blobs' && at(-1) === 'contents') return { kind: 'blob-contents', name: name(3), digest: at(-2) };
  if (n >= 3 && at(-2) === 'blobs') return { kind: 'blob', name: name(2), digest: at(-1) };
  if (n >= 3 && at(-2) === 'manifests') return { kind: 'manifest', name: name(2), reference: at(-1) };
  if (n >= 3 && at(-2) === 'tags' && at(-1) === 'list') return { kind: 'tags', name: name(2) };
  if (n >= 3 && at(-2) === 'referrers') return { kind: 'referrers', name: name(2), digest: at(-1) };
  throw new OciError('NAME_UNKNOWN', `no registry endpoint at /v2/${s.join('/')}`);
}
