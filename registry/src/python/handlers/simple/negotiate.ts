/**
 * PEP 691 content negotiation for Simple pages: the client's `Accept` header (with q-values)
 * picks JSON or one of the two HTML media types.
 *
 * Ties go to JSON only when the client named a JSON type as specifically as any HTML type, so
 * pip and uv (which list JSON first with q=1) get JSON, while a browser or `*\/*` gets HTML.
 * A header that accepts none of our types gets HTML rather than 406: the spec says "JSON when
 * asked, else text/html", and old clients send odd headers.
 */

export type SimpleFormat = 'json' | 'html';

export interface Negotiated {
  format: SimpleFormat;
  /** The media type to put in `Content-Type`. */
  contentType: string;
}

export const JSON_TYPE = 'application/vnd.pypi.simple.v1+json';
export const HTML_V1_TYPE = 'application/vnd.pypi.simple.v1+html';
export const TEXT_HTML = 'text/html';

interface Offer {
  negotiated: Negotiated;
  /** Exact media types (after `latest` aliasing) that name this offer. */
  names: string[];
}

/** In server preference order for exact ties. */
const OFFERS: Offer[] = [
  { negotiated: { format: 'json', contentType: JSON_TYPE }, names: [JSON_TYPE, 'application/vnd.pypi.simple.latest+json'] },
  { negotiated: { format: 'html', contentType: HTML_V1_TYPE }, names: [HTML_V1_TYPE, 'application/vnd.pypi.simple.latest+html'] },
  { negotiated: { format: 'html', contentType: 'text/html; charset=utf-8' }, names: [TEXT_HTML] },
];
const DEFAULT = OFFERS[2]!.negotiated;

interface Range {
  type: string;
  q: number;
}

function parseAccept(header: string): Range[] {
  const ranges: Range[] = [];
  for (const part of header.split(',')) {
    const [typePart, ...params] = part.split(';');
    const type = (typePart ?? '').trim().toLowerCase();
    if (!type.includes('/')) continue;
    let q = 1;
    for (const p of params) {
      const [k, v] = p.split('=').map((s) => s.trim());
      if (k?.toLowerCase() === 'q' && v !== undefined) {
        const n = Number(v);
        q = Number.isFinite(n) ? Math.min(Math.max(n, 0), 1) : 0;
      }
    }
    ranges.push({ type, q });
  }
  return ranges;
}

/** How specifically `range` names `mediaType`: 3 exact, 2 `type/*`, 1 `*\/*`, 0 not at all. */
function specificity(range: string, names: string[]): number {
  if (names.includes(range)) return 3;
  if (range === '*/*') return 1;
  if (range.endsWith('/*')) return names.some((n) => n.startsWith(range.slice(0, -1))) ? 2 : 0;
  return 0;
}

export function negotiate(accept: string | undefined): Negotiated {
  if (!accept || accept.trim() === '') return DEFAULT;
  const ranges = parseAccept(accept);
  let best: { offer: Offer; q: number; spec: number; order: number } | null = null;
  for (const [i, offer] of OFFERS.entries()) {
    // The most specific matching range decides the offer's q (RFC 9110 §12.5.1).
    let spec = 0;
    let q = 0;
    for (const r of ranges) {
      const s = specificity(r.type, offer.names);
      if (s > spec || (s === spec && s > 0 && r.q > q)) {
        spec = s;
        q = r.q;
      }
    }
    if (spec === 0 || q === 0) continue;
    // Only explicitly named types use the JSON-first order; wildcards prefer text/html.
    const order = spec === 3 ? i : OFFERS.length - i;
    if (!best || q > best.q || (q === best.q && (spec > best.spec || (spec === best.spec && order < best.order)))) {
      best = { offer, q, spec, order };
    }
  }
  return best?.offer.negotiated ?? DEFAULT;
}
