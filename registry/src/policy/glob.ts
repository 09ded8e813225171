/**
 * Name globs of the policy rules and of retention's `keep_tags`: `*` is any run of characters,
 * `?` one character; the rest is literal. Globs come from config and from tenants' PackageIndex
 * resources, so matching must stay cheap whatever the glob: it runs in time proportional to
 * glob length × name length (the greedy wildcard match, back to the last `*` on a mismatch),
 * never a regular expression's backtracking (`*a*a*a*…b` against a long name would stall the
 * process).
 */

export interface Glob {
  test(name: string): boolean;
}

export function compileGlob(glob: string): Glob {
  const pattern = [...glob];
  return { test: (name) => matches(pattern, [...name]) };
}

function matches(p: readonly string[], s: readonly string[]): boolean {
  let pi = 0;
  let si = 0;
  // Where the last `*` was, and the first name position it has not yet swallowed.
  let star = -1;
  let resume = 0;
  while (si < s.length) {
    if (pi < p.length && (p[pi] === '?' || (p[pi] !== '*' && p[pi] === s[si]))) {
      pi += 1;
      si += 1;
    } else if (pi < p.length && p[pi] === '*') {
      star = pi;
      resume = si;
      pi += 1;
    } else if (star >= 0) {
      pi = star + 1;
      resume += 1;
      si = resume;
    } else {
      return false;
    }
  }
  while (pi < p.length && p[pi] === '*') pi += 1;
  return pi === p.length;
}
