/**
 * What an upstream says about its own pressure, read from its answers' headers:
 *
 * - `ratelimit-limit` / `ratelimit-remaining` (Docker Hub's pull limit; the IETF RateLimit draft's
 *   older fields): `100;w=21600` is 100 requests per window of 21600 seconds. A list of policies
 *   (`100;w=21600, 1000;w=86400`) is read by its first. Anything else is no figure at all.
 * - `Retry-After` on a 429 (or a 503): seconds, or an HTTP date; bounded to `MAX_RETRY_AFTER_SECS`
 *   so an upstream's typo cannot take it out of rotation for a year.
 *
 * Pure functions: the property tests drive them with arbitrary strings.
 */

/** An upstream is never left alone longer than this on its word (an hour). */
export const MAX_RETRY_AFTER_SECS = 3600;

/** A count of requests, and the window it applies to when the header names one. */
export interface RateLimitFigure {
  count: number;
  windowSecs?: number;
}

const COUNT = /^\d{1,15}$/;

/** `100`, `100;w=21600` or a list of them (the first counts); null for anything else. */
export function parseRateLimitHeader(value: string | undefined): RateLimitFigure | null {
  if (value === undefined) return null;
  const first = value.split(',')[0]!.trim();
  const [countPart, ...params] = first.split(';').map((p) => p.trim());
  if (countPart === undefined || !COUNT.test(countPart)) return null;
  const figure: RateLimitFigure = { count: Number(countPart) };
  for (const param of params) {
    const eq = param.indexOf('=');
    if (eq < 0) continue;
    const name = param.slice(0, eq).trim().toLowerCase();
    const raw = param.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
    if (name !== 'w') continue;
    if (!COUNT.test(raw) || Number(raw) === 0) return null;
    figure.windowSecs = Number(raw);
  }
  return figure;
}

/** An HTTP date starts with a day name (IMF-fixdate, RFC 850, asctime); `Date.parse` alone takes "1" for a year. */
const HTTP_DATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*, ?\s*\d|^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} /;

/**
 * How long to leave the upstream alone, in milliseconds, from `Retry-After` at `now`: 0 for a
 * date already past, at most `maxSecs`; null when the header is absent or is neither form.
 */
export function parseRetryAfter(value: string | undefined, now: number, maxSecs = MAX_RETRY_AFTER_SECS): number | null {
  if (value === undefined) return null;
  const v = value.trim();
  let ms: number;
  if (COUNT.test(v)) ms = Number(v) * 1000;
  else if (HTTP_DATE.test(v)) {
    const at = Date.parse(v);
    if (!Number.isFinite(at)) return null;
    ms = at - now;
  } else return null;
  return Math.min(Math.max(ms, 0), maxSecs * 1000);
}
