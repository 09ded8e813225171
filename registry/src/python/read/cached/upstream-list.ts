/**
 * An upstream's project list (`/simple/`, PEP 691 JSON or PEP 503 HTML) as normalized names.
 * PyPI's list has some 600,000 names (tens of MB as JSON); the document is bounded by the
 * document cache's byte limit, and the names by `MAX_LIST_NAMES` (the rest are left out).
 */
import { normalizeName } from '../../model/records.js';
import { readHtmlLinks } from './html-links.js';

export const MAX_LIST_NAMES = 1_000_000;
/** The most bytes of an upstream project list that are read (PyPI's JSON list is ~30 MB). */
export const MAX_LIST_BYTES = 128 * 1024 * 1024;

export function parseUpstreamList(body: Buffer, contentType: string | undefined, max = MAX_LIST_NAMES): string[] {
  const text = body.toString('utf8');
  const json = contentType ? /json/i.test(contentType) : /^\s*\{/.test(text);
  const raw: string[] = [];
  if (json) {
    const doc = JSON.parse(text) as { projects?: unknown };
    if (Array.isArray(doc.projects)) {
      for (const p of doc.projects as unknown[]) {
        const name = (p as { name?: unknown } | null)?.name;
        if (typeof name === 'string') raw.push(name);
      }
    }
  } else {
    for (const a of readHtmlLinks(text).anchors) raw.push(a.text);
  }
  const names = new Set<string>();
  for (const n of raw) {
    const normalized = normalizeName(n.trim());
    if (!/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/.test(normalized)) continue;
    names.add(normalized);
    if (names.size >= max) break;
  }
  return [...names].sort();
}
